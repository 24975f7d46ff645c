package k8s

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/telemetry"
)

// sinkCall is one call of an observed Sink: the IDs of the set it was
// given, the set's labels by ID, and what it returned.
type sinkCall struct {
	ids    []string
	labels map[string]map[string]string
	err    error
}

// observedSink wraps a Sink so that a test receives every call, in order,
// once the wrapped Sink has returned.
func observedSink(inner Sink) (Sink, <-chan sinkCall) {
	calls := make(chan sinkCall, 64)
	return func(eps []kvroute.Endpoint) error {
		err := inner(eps)
		c := sinkCall{ids: []string{}, labels: map[string]map[string]string{}, err: err}
		for _, e := range eps {
			c.ids = append(c.ids, e.ID)
			c.labels[e.ID] = e.Labels
		}
		calls <- c
		return err
	}, calls
}

// nextSinkCall returns the next call of an observed Sink.
func nextSinkCall(t *testing.T, calls <-chan sinkCall) sinkCall {
	t.Helper()
	select {
	case c := <-calls:
		return c
	case <-time.After(wait):
		t.Fatal("the Sink was not called")
		return sinkCall{}
	}
}

// debouncedChange applies a change to the cluster, waits until the
// informer's store shows it (settled) and the Discovery's loop, idle
// before, has armed its debounce for it, and fires the debounce: the
// recompute that follows reads a store that holds the change. The clock
// must be the Discovery's alone.
func debouncedChange(t *testing.T, f *fixture, clk *telemetry.Manual, change func(), settled func() bool) {
	t.Helper()
	change()
	require.Eventually(t, func() bool { return settled() && clk.Waiters() == 1 }, wait, time.Millisecond,
		"the change reached the store and armed the debounce")
	clk.Advance(f.d.cfg.Debounce)
}

// podStore is the store of the pod informer in force.
func (f *fixture) podStore() cache.Store {
	f.d.podsMu.Lock()
	defer f.d.podsMu.Unlock()
	return f.d.pods.inf.GetStore()
}

// inStore reports whether the pod informer's store holds the pod.
func (f *fixture) inStore(name string) bool {
	_, ok, _ := f.podStore().GetByKey(ns + "/" + name)
	return ok
}

func (f *fixture) createPod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	_, err := f.kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (f *fixture) deletePod(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, f.kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
}

// A Sink error says nothing of what the Sink holds (Router.SetEndpoints
// commits the set and then reports the subscriptions it could not
// ensure): the next recompute sends its set even when it equals the one
// the Sink last accepted. Once a call succeeds, an unchanged set is not
// sent again.
func TestSinkErrorMakesTheNextRecomputeSendTheSet(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	vllm := map[string]string{"app": "vllm"}
	var refuse atomic.Bool
	refused := errors.New("a subscription could not be ensured")
	sink, calls := observedSink(func([]kvroute.Endpoint) error {
		if refuse.Load() {
			return refused
		}
		return nil
	})
	f := newFixtureWithOptions(t, Config{Selector: "app=vllm", TargetPorts: []int32{8000}, Debounce: time.Minute},
		[]*corev1.Pod{pod("a", "10.0.0.1", vllm, true)}, sink, Options{Set: telemetry.Set{Clock: clk}})
	defer f.d.Close()
	require.Equal(t, []string{"10.0.0.1:8000"}, nextSinkCall(t, calls).ids, "Start sends the first set")

	refuse.Store(true)
	debouncedChange(t, f, clk, func() { f.createPod(t, pod("c", "10.0.0.3", vllm, true)) }, func() bool { return f.inStore("c") })
	c := nextSinkCall(t, calls)
	require.Equal(t, []string{"10.0.0.1:8000", "10.0.0.3:8000"}, c.ids)
	require.ErrorIs(t, c.err, refused)
	require.Equal(t, []string{"10.0.0.1:8000"}, ids(f.d.Endpoints()), "Endpoints is the set last accepted")

	refuse.Store(false)
	debouncedChange(t, f, clk, func() { f.deletePod(t, "c") }, func() bool { return !f.inStore("c") })
	c = nextSinkCall(t, calls)
	require.Equal(t, []string{"10.0.0.1:8000"}, c.ids, "the set is sent again although the Sink last accepted it")
	require.NoError(t, c.err)

	// A change that leaves the set as it is calls no Sink; the next call
	// is the next change's.
	a := pod("a", "10.0.0.1", vllm, true)
	a.Annotations = map[string]string{"unrelated": "1"}
	debouncedChange(t, f, clk, func() { f.updatePod(t, a) }, func() bool {
		obj, ok, _ := f.podStore().GetByKey(ns + "/a")
		return ok && obj.(*corev1.Pod).Annotations["unrelated"] == "1"
	})
	// The unchanged set's recompute calls no Sink, so nothing says when it
	// is over: the next change may come while it still runs, and be taken
	// into it (its poke drained, the store read after the change) instead
	// of arming a debounce of its own. Either way the next Sink call is
	// that change's.
	marked := pod("a", "10.0.0.1", map[string]string{"app": "vllm", "marker": "1"}, true)
	f.updatePod(t, marked)
	c = sinkCallFiringDebounces(t, f, clk, calls)
	require.Equal(t, "1", c.labels["10.0.0.1:8000"]["marker"], "no call for the unchanged set")
}

// sinkCallFiringDebounces returns the next call of an observed Sink,
// firing each debounce the Discovery's loop arms until it comes. The clock
// must be the Discovery's alone.
func sinkCallFiringDebounces(t *testing.T, f *fixture, clk *telemetry.Manual, calls <-chan sinkCall) sinkCall {
	t.Helper()
	var c sinkCall
	require.Eventually(t, func() bool {
		select {
		case c = <-calls:
			return true
		default:
		}
		if clk.Waiters() == 1 {
			clk.Advance(f.d.cfg.Debounce)
		}
		return false
	}, wait, time.Millisecond, "the Sink was not called")
	return c
}

func ids(eps []kvroute.Endpoint) []string {
	out := []string{}
	for _, e := range eps {
		out = append(out, e.ID)
	}
	return out
}

// Discovery feeding a real Router whose SetEndpoints applies a set and
// returns an error (a pod's replay port annotation, which a router whose
// engines have their replay off cannot use): when the pods that came with the error leave, the
// set equals the one the Router last accepted without error, and it is
// sent all the same, so the Router drops the deleted pods.
func TestRouterDropsPodsDeletedAfterASinkError(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := kvroute.DefaultConfig()
	cfg.Model = "m"
	cfg.Events.Engine = kvevents.EngineNoReplay // no replay socket: a replay annotation makes the subscription fail
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	require.NoError(t, err)
	defer router.Close()

	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	vllm := map[string]string{"app": "vllm"}
	sink, calls := observedSink(router.SetEndpoints)
	f := newFixtureWithOptions(t, Config{Selector: "app=vllm", TargetPorts: []int32{8000}, Debounce: time.Minute},
		[]*corev1.Pod{pod("a", "127.0.0.1", vllm, true)}, sink, Options{Set: telemetry.Set{Clock: clk}})
	defer f.d.Close()
	require.NoError(t, nextSinkCall(t, calls).err)
	require.Equal(t, []string{"127.0.0.1:8000"}, router.Events().Endpoints())

	// c carries a replay annotation: the Router applies {a, c} and returns
	// an error.
	c := pod("c", "127.0.0.3", vllm, true)
	c.Annotations = map[string]string{DefaultReplayPortAnnotation: "5559"}
	debouncedChange(t, f, clk, func() { f.createPod(t, c) }, func() bool { return f.inStore("c") })
	require.Error(t, nextSinkCall(t, calls).err)

	// b is a good pod: the Router applies {a, b, c} and subscribes b, again
	// with an error for c.
	debouncedChange(t, f, clk, func() { f.createPod(t, pod("b", "127.0.0.2", vllm, true)) }, func() bool { return f.inStore("b") })
	require.Error(t, nextSinkCall(t, calls).err)
	require.Contains(t, router.Events().Endpoints(), "127.0.0.2:8000", "b subscribed")

	// b and c leave: the set is {a} again, the one the Router last accepted
	// without error.
	debouncedChange(t, f, clk, func() { f.deletePod(t, "b"); f.deletePod(t, "c") },
		func() bool { return !f.inStore("b") && !f.inStore("c") })
	last := nextSinkCall(t, calls)
	require.Equal(t, []string{"127.0.0.1:8000"}, last.ids)
	require.NoError(t, last.err)
	require.Equal(t, []string{"127.0.0.1:8000"}, router.Events().Endpoints(), "deleted pod b is not subscribed")
}
