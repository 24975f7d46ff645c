package k8s

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

const (
	ns   = "llm"
	wait = 20 * time.Second
)

func pod(name, ip string, lbl map[string]string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func poolObj(gvr schema.GroupVersionResource, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "InferencePool",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	return u
}

func v1Spec(ports ...int64) map[string]any {
	tp := []any{}
	for _, p := range ports {
		tp = append(tp, map[string]any{"number": p})
	}
	return map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "vllm"}}, "targetPorts": tp,
		"endpointPickerRef": map[string]any{"name": "kvroute-epp"}}
}

// recorder is a Sink that keeps every set it was given.
type recorder struct {
	mu   sync.Mutex
	sets [][]kvroute.Endpoint
}

func (r *recorder) sink(eps []kvroute.Endpoint) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sets = append(r.sets, eps)
	return nil
}

func (r *recorder) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sets) == 0 {
		return nil
	}
	out := []string{}
	for _, e := range r.sets[len(r.sets)-1] {
		out = append(out, e.ID)
	}
	return out
}

type fixture struct {
	kube *fake.Clientset
	dyn  *dynfake.FakeDynamicClient
	rec  *recorder
	d    *Discovery
}

func newFixture(t *testing.T, cfg Config, pods []*corev1.Pod, pools ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWithSink(t, cfg, pods, nil, pools...)
}

// newFixtureWithSink is newFixture with the Sink given (nil: a recorder).
func newFixtureWithSink(t *testing.T, cfg Config, pods []*corev1.Pod, sink Sink, pools ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWithOptions(t, cfg, pods, sink, Options{}, pools...)
}

// newFixtureWithOptions is newFixtureWithSink with the Discovery's Options.
func newFixtureWithOptions(t *testing.T, cfg Config, pods []*corev1.Pod, sink Sink, opts Options, pools ...runtime.Object) *fixture {
	t.Helper()
	objs := make([]runtime.Object, len(pods))
	for i, p := range pods {
		objs[i] = p
	}
	f := &fixture{kube: fake.NewClientset(objs...), rec: &recorder{}}
	f.dyn = dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		PoolV1: "InferencePoolList", PoolV1Alpha2: "InferencePoolList",
	}, pools...)
	cfg.Namespace = ns
	if cfg.Debounce == 0 {
		cfg.Debounce = 10 * time.Millisecond
	}
	var err error
	if sink == nil {
		sink = f.rec.sink
	}
	f.d, err = New(cfg, f.kube, f.dyn, sink, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, f.d.Start(ctx))
	return f
}

func (f *fixture) eventually(t *testing.T, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	require.Eventually(t, func() bool { return fmt.Sprint(f.rec.ids()) == fmt.Sprint(want) }, wait, 5*time.Millisecond,
		"want %v", want)
}

func (f *fixture) updatePod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	_, err := f.kube.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func TestInferencePoolReadyPodsAreEndpoints(t *testing.T) {
	defer leakcheck.Check(t)()
	vllm := map[string]string{"app": "vllm"}
	f := newFixture(t, Config{Pool: "pool"}, []*corev1.Pod{
		pod("a", "10.0.0.1", vllm, true),
		pod("b", "10.0.0.2", vllm, false),
		pod("c", "10.0.0.3", map[string]string{"app": "other"}, true),
	}, poolObj(PoolV1, "pool", v1Spec(8000)))
	defer f.d.Close()
	f.eventually(t, "10.0.0.1:8000")
	require.True(t, f.d.Synced())
	require.Equal(t, map[string]string{"app": "vllm"}, f.d.Endpoints()[0].Labels)

	// Ready flip: b becomes Ready, then a stops being Ready.
	f.updatePod(t, pod("b", "10.0.0.2", vllm, true))
	f.eventually(t, "10.0.0.1:8000", "10.0.0.2:8000")
	f.updatePod(t, pod("a", "10.0.0.1", vllm, false))
	f.eventually(t, "10.0.0.2:8000")

	// Relabelled out of the selector, and into it.
	f.updatePod(t, pod("b", "10.0.0.2", map[string]string{"app": "drained"}, true))
	f.eventually(t)
	f.updatePod(t, pod("c", "10.0.0.3", vllm, true))
	f.eventually(t, "10.0.0.3:8000")

	// Deleted.
	require.NoError(t, f.kube.CoreV1().Pods(ns).Delete(context.Background(), "c", metav1.DeleteOptions{}))
	f.eventually(t)
}

func TestInferencePoolTargetPortChangesAndDataParallelRanks(t *testing.T) {
	defer leakcheck.Check(t)()
	p := pod("a", "10.0.0.1", map[string]string{"app": "vllm"}, true)
	p.Annotations = map[string]string{DefaultEventsPortAnnotation: "5556", DefaultReplayPortAnnotation: "5559"}
	f := newFixture(t, Config{Pool: "pool"}, []*corev1.Pod{p}, poolObj(PoolV1, "pool", v1Spec(8000)))
	defer f.d.Close()
	f.eventually(t, "10.0.0.1:8000")

	_, err := f.dyn.Resource(PoolV1).Namespace(ns).Update(context.Background(), poolObj(PoolV1, "pool", v1Spec(8000, 8001)), metav1.UpdateOptions{})
	require.NoError(t, err)
	f.eventually(t, "10.0.0.1:8000", "10.0.0.1:8001")
	eps := f.d.Endpoints()
	require.Equal(t, 0, eps[0].Rank)
	require.Equal(t, 1, eps[1].Rank)
	require.Equal(t, "tcp://10.0.0.1:5557", eps[1].EventsAddress, "rank r publishes on the events port + r")
	require.Equal(t, "tcp://10.0.0.1:5560", eps[1].ReplayAddress)

	_, err = f.dyn.Resource(PoolV1).Namespace(ns).Update(context.Background(), poolObj(PoolV1, "pool", v1Spec(9000)), metav1.UpdateOptions{})
	require.NoError(t, err)
	f.eventually(t, "10.0.0.1:9000")

	// The pool disappears: no endpoints, and the reason is reported.
	require.NoError(t, f.dyn.Resource(PoolV1).Namespace(ns).Delete(context.Background(), "pool", metav1.DeleteOptions{}))
	f.eventually(t)
	require.ErrorContains(t, f.d.PoolError(), "not found")
}

// A resync storm of updates that change nothing reaches the Sink zero times;
// a storm of real changes is coalesced by the debounce.
func TestResyncStormIsCoalesced(t *testing.T) {
	defer leakcheck.Check(t)()
	vllm := map[string]string{"app": "vllm"}
	f := newFixture(t, Config{Selector: "app=vllm", TargetPorts: []int32{8000}, Debounce: 50 * time.Millisecond},
		[]*corev1.Pod{pod("a", "10.0.0.1", vllm, true)})
	defer f.d.Close()
	f.eventually(t, "10.0.0.1:8000")
	base := f.d.SinkCalls()
	for i := range 300 {
		p := pod("a", "10.0.0.1", vllm, true)
		p.Annotations = map[string]string{"unrelated": fmt.Sprint(i)}
		f.updatePod(t, p)
	}
	// A marker change after the storm: once it shows, every storm event has
	// been processed.
	f.updatePod(t, pod("a", "10.0.0.1", map[string]string{"app": "vllm", "marker": "1"}, true))
	require.Eventually(t, func() bool {
		eps := f.d.Endpoints()
		return len(eps) == 1 && eps[0].Labels["marker"] == "1"
	}, wait, 5*time.Millisecond)
	require.Equal(t, base+1, f.d.SinkCalls(), "only the marker changed the set")

	base = f.d.SinkCalls()
	for i := range 200 {
		f.updatePod(t, pod("a", "10.0.0.1", map[string]string{"app": "vllm", "gen": fmt.Sprint(i)}, true))
	}
	require.Eventually(t, func() bool {
		eps := f.d.Endpoints()
		return len(eps) == 1 && eps[0].Labels["gen"] == "199"
	}, wait, 5*time.Millisecond)
	require.Less(t, f.d.SinkCalls()-base, 200, "changes are coalesced, not one Sink call per event")
}

func TestV1Alpha2PoolIsUnderstood(t *testing.T) {
	defer leakcheck.Check(t)()
	spec := map[string]any{"selector": map[string]any{"app": "vllm"}, "targetPortNumber": int64(8000)}
	f := newFixture(t, Config{Pool: "old", PoolVersion: "v1alpha2"},
		[]*corev1.Pod{pod("a", "10.0.0.1", map[string]string{"app": "vllm"}, true)}, poolObj(PoolV1Alpha2, "old", spec))
	defer f.d.Close()
	f.eventually(t, "10.0.0.1:8000")
}

func TestDecodeInferencePoolRejectsUnusablePools(t *testing.T) {
	for name, spec := range map[string]map[string]any{
		"no selector": {"targetPorts": []any{map[string]any{"number": int64(8000)}}},
		"no port":     {"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}}},
		"bad port":    {"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}}, "targetPorts": []any{map[string]any{"number": int64(70000)}}},
		"port twice": {"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
			"targetPorts": []any{map[string]any{"number": int64(8000)}, map[string]any{"number": int64(8000)}}},
		"invalid label name":  {"selector": map[string]any{"matchLabels": map[string]any{"a b": "x"}}, "targetPortNumber": int64(8000)},
		"invalid label value": {"selector": map[string]any{"app": "-x-"}, "targetPortNumber": int64(8000)},
	} {
		_, err := DecodeInferencePool(poolObj(PoolV1, "p", spec))
		require.Error(t, err, name)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	kube := fake.NewClientset()
	sink := func([]kvroute.Endpoint) error { return nil }
	for name, cfg := range map[string]Config{
		"no namespace":          {Selector: "a=b", TargetPorts: []int32{1}},
		"empty selector":        {Namespace: ns, TargetPorts: []int32{1}},
		"no ports":              {Namespace: ns, Selector: "a=b"},
		"bad selector":          {Namespace: ns, Selector: "a in (", TargetPorts: []int32{1}},
		"port twice":            {Namespace: ns, Selector: "a=b", TargetPorts: []int32{8000, 8001, 8000}},
		"both":                  {Namespace: ns, Pool: "p", Selector: "a=b"},
		"bad version":           {Namespace: ns, Pool: "p", PoolVersion: "v9"},
		"version with selector": {Namespace: ns, Selector: "a=b", TargetPorts: []int32{1}, PoolVersion: "v1"},
		"negative debounce":     {Namespace: ns, Pool: "p", Debounce: -1},
		"negative maxEndpoints": {Namespace: ns, Pool: "p", MaxEndpoints: -1},
	} {
		_, err := New(cfg, kube, dynfake.NewSimpleDynamicClient(runtime.NewScheme()), sink, Options{})
		require.Error(t, err, name)
	}
}

// New refuses a missing client with an error naming it, instead of a
// Discovery whose informers panic on their own goroutines at Start: the
// Kubernetes clientset always (the pods are listed with it; a nil
// *kubernetes.Clientset in the interface is as missing), the dynamic
// client when following an InferencePool. Nothing is left registered.
func TestNewRequiresTheClients(t *testing.T) {
	sink := func([]kvroute.Endpoint) error { return nil }
	dyn := dynfake.NewSimpleDynamicClient(runtime.NewScheme())
	for name, c := range map[string]struct {
		cfg  Config
		kube kubernetes.Interface
		dyn  dynamic.Interface
		want string
	}{
		"selector without clientset": {Config{Namespace: ns, Selector: "a=b", TargetPorts: []int32{8000}}, nil, nil, "Kubernetes clientset"},
		"pool without clientset":     {Config{Namespace: ns, Pool: "p"}, nil, dyn, "Kubernetes clientset"},
		"pool without dynamic":       {Config{Namespace: ns, Pool: "p"}, fake.NewClientset(), nil, "dynamic client"},
		"typed-nil clientset":        {Config{Namespace: ns, Selector: "a=b", TargetPorts: []int32{8000}}, (*kubernetes.Clientset)(nil), nil, "Kubernetes clientset"},
		"pool typed-nil clientset":   {Config{Namespace: ns, Pool: "p"}, (*kubernetes.Clientset)(nil), dyn, "Kubernetes clientset"},
	} {
		reg := prometheus.NewRegistry()
		_, err := New(c.cfg, c.kube, c.dyn, sink, Options{Set: telemetry.Set{Registerer: reg}})
		require.ErrorContains(t, err, c.want, name)
		mfs, err := reg.Gather()
		require.NoError(t, err)
		require.Empty(t, mfs, name)
	}
}

func TestMatcherUsesKubernetesSemantics(t *testing.T) {
	sel, err := labels.Parse("tier in (a,b),!canary")
	require.NoError(t, err)
	m := Matcher(sel)
	require.True(t, m(map[string]string{"tier": "a"}))
	require.False(t, m(map[string]string{"tier": "a", "canary": ""}))
	require.False(t, m(map[string]string{"tier": "c"}))
}

// A pod's active-ports annotation (llm-d's llm-d.ai/active-ports, or the
// Inference Extension's inference.networking.k8s.io/active-ports) limits
// its endpoints to the target ports it lists, each keeping its rank (its
// index in the pool's ports); a listed port the pool does not have, or an
// entry that is no port, is left out and counted; a pod without the
// annotation serves every target port.
func TestActivePortsAnnotationLimitsAPodsRanks(t *testing.T) {
	defer leakcheck.Check(t)()
	vllm := map[string]string{"app": "vllm"}
	a := pod("a", "10.0.0.1", vllm, true)
	a.Annotations = map[string]string{"llm-d.ai/active-ports": "8001, 8003", DefaultEventsPortAnnotation: "5557"}
	b := pod("b", "10.0.0.2", vllm, true)
	b.Annotations = map[string]string{"inference.networking.k8s.io/active-ports": "8000,9999,x"}
	c := pod("c", "10.0.0.3", vllm, true)
	f := newFixture(t, Config{Pool: "pool"}, []*corev1.Pod{a, b, c}, poolObj(PoolV1, "pool", v1Spec(8000, 8001, 8002, 8003)))
	defer f.d.Close()
	f.eventually(t, "10.0.0.1:8001", "10.0.0.1:8003", "10.0.0.2:8000",
		"10.0.0.3:8000", "10.0.0.3:8001", "10.0.0.3:8002", "10.0.0.3:8003")
	eps := f.d.Endpoints()
	require.Equal(t, 1, eps[0].Rank)
	require.Equal(t, "tcp://10.0.0.1:5558", eps[0].EventsAddress, "rank 1 publishes on the events port + 1")
	require.Equal(t, 3, eps[1].Rank)
	require.Equal(t, 0, eps[2].Rank)
	require.Equal(t, float64(1), testutil.ToFloat64(f.d.met.problems[problemActivePorts]), "b's 9999 and x")

	// The annotation changed at run time (a rank came up) applies.
	a.Annotations["llm-d.ai/active-ports"] = "8000,8001,8003"
	f.updatePod(t, a)
	f.eventually(t, "10.0.0.1:8000", "10.0.0.1:8001", "10.0.0.1:8003", "10.0.0.2:8000",
		"10.0.0.3:8000", "10.0.0.3:8001", "10.0.0.3:8002", "10.0.0.3:8003")
}

// An InferencePool being deleted (its deletionTimestamp set, finalizers
// still pending) is no longer followed, as the Inference Extension's pool
// reconciler clears its datastore for it: its endpoints leave the set, the
// pool is reported unusable (PoolError, kvroute_k8s_discovery_pool_unusable)
// and the warning is logged once, however many recomputes follow.
func TestInferencePoolBeingDeletedIsGone(t *testing.T) {
	defer leakcheck.Check(t)()
	vllm := map[string]string{"app": "vllm"}
	logs := &logCounter{}
	f := newFixtureWithOptions(t, Config{Pool: "pool"}, []*corev1.Pod{pod("a", "10.0.0.1", vllm, true)}, nil,
		Options{Set: telemetry.Set{Logger: slog.New(logs)}}, poolObj(PoolV1, "pool", v1Spec(8000)))
	defer f.d.Close()
	f.eventually(t, "10.0.0.1:8000")

	deleting := poolObj(PoolV1, "pool", v1Spec(8000))
	deleting.SetFinalizers([]string{"example.com/cleanup"})
	deleting.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	_, err := f.dyn.Resource(PoolV1).Namespace(ns).Update(context.Background(), deleting, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.eventually(t)
	require.ErrorContains(t, f.d.PoolError(), "being deleted")
	require.Equal(t, float64(1), testutil.ToFloat64(f.d.met.poolUnusable))

	// Further changes recompute; the warning is not repeated. The pool
	// then goes for good: the reason changes, and is logged.
	for i := range 3 {
		f.updatePod(t, pod("a", "10.0.0.1", map[string]string{"app": "vllm", "gen": fmt.Sprint(i)}, true))
		time.Sleep(30 * time.Millisecond) // past the debounce: one recompute each
	}
	require.NoError(t, f.dyn.Resource(PoolV1).Namespace(ns).Delete(context.Background(), "pool", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return logs.count("not found") == 1 }, wait, 5*time.Millisecond)
	require.Equal(t, 1, logs.count("being deleted"), "logged once")
	require.Empty(t, f.rec.ids())
}

// logCounter is a slog.Handler that keeps the err attribute of every
// warning that discovery's InferencePool is unusable.
type logCounter struct {
	mu   sync.Mutex
	errs []string
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCounter) WithGroup(string) slog.Handler            { return l }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			l.mu.Lock()
			l.errs = append(l.errs, r.Message+": "+a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

// count returns how many logged errors contain s.
func (l *logCounter) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.errs {
		if strings.Contains(e, s) {
			n++
		}
	}
	return n
}

// MaxEndpoints cuts whole pods, never some of one pod's data-parallel
// ranks: the pods are taken in the order of their endpoint IDs while their
// endpoints fit, and the endpoints of the others are counted as left out.
func TestMaxEndpointsCutsWholePods(t *testing.T) {
	defer leakcheck.Check(t)()
	vllm := map[string]string{"app": "vllm"}
	f := newFixtureWithOptions(t, Config{Pool: "pool", MaxEndpoints: 3}, []*corev1.Pod{
		pod("a", "10.0.0.1", vllm, true), pod("b", "10.0.0.2", vllm, true), pod("c", "10.0.0.3", vllm, true),
	}, nil, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}}, poolObj(PoolV1, "pool", v1Spec(8000, 8001)))
	defer f.d.Close()
	f.eventually(t, "10.0.0.1:8000", "10.0.0.1:8001")
	require.Equal(t, float64(2), testutil.ToFloat64(f.d.met.endpoints))
	require.Equal(t, float64(4), testutil.ToFloat64(f.d.met.leftOut), "b's and c's ranks")
	//PODS require.Equal(t, float64(2), testutil.ToFloat64(f.d.met.podsLeftOut))

	// a leaves: b takes its place, whole.
	f.updatePod(t, pod("a", "10.0.0.1", vllm, false))
	f.eventually(t, "10.0.0.2:8000", "10.0.0.2:8001")
	require.Equal(t, float64(2), testutil.ToFloat64(f.d.met.leftOut))
	//PODS require.Equal(t, float64(1), testutil.ToFloat64(f.d.met.podsLeftOut))
}

// Two Ready hostNetwork pods on one node (one IP) that serve the same
// target port would give the same endpoint ID twice: only one of them can
// hold the port (the other's readiness probe may well reach the first's
// server). The pod created first keeps the ID; the other is left out as
// not ready, warned of and counted (pod_problems{reason=
// "duplicate_address"}), and takes over when the first leaves. Before, the
// set carried the ID twice.
func TestPodsSharingAnAddressGiveOneEndpoint(t *testing.T) {
	defer leakcheck.Check(t)()
	at := func(p *corev1.Pod, sec int64) *corev1.Pod {
		p.CreationTimestamp = metav1.Unix(1_700_000_000+sec, 0)
		p.Spec.HostNetwork = true
		return p
	}
	lbl := func(name string) map[string]string { return map[string]string{"app": "vllm", "name": name} }
	logs := &logRecorder{msg: "k8s: leaving out a Ready pod whose endpoint ID another pod already has"}
	f := newFixtureWithOptions(t, Config{Pool: "pool"}, []*corev1.Pod{
		at(pod("b", "10.0.0.1", lbl("b"), true), 2),
		at(pod("a", "10.0.0.1", lbl("a"), true), 1),
		pod("c", "10.0.0.2", lbl("c"), true),
	}, nil, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Logger: slog.New(logs)}},
		poolObj(PoolV1, "pool", v1Spec(8000)))
	defer f.d.Close()
	f.eventually(t, "10.0.0.1:8000", "10.0.0.2:8000")
	require.Equal(t, "a", f.d.Endpoints()[0].Labels["name"], "the pod created first keeps the address")
	require.Equal(t, float64(1), testutil.ToFloat64(f.d.met.problems[problemDuplicateAddress]))
	require.Equal(t, []string{ns + "/b"}, logs.values(), "warned of once")

	// a stops being Ready: b serves the port now.
	f.updatePod(t, at(pod("a", "10.0.0.1", lbl("a"), false), 1))
	require.Eventually(t, func() bool {
		eps := f.d.Endpoints()
		return len(eps) == 2 && eps[0].Labels["name"] == "b"
	}, wait, 5*time.Millisecond)
	f.eventually(t, "10.0.0.1:8000", "10.0.0.2:8000")
	require.Zero(t, testutil.ToFloat64(f.d.met.problems[problemDuplicateAddress]))
}
