package admission

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// switchDetector is an engine detector the test sets per endpoint.
type switchDetector struct {
	mu    sync.Mutex
	sat   map[string]bool
	known map[string]bool
}

func newSwitch() *switchDetector {
	return &switchDetector{sat: map[string]bool{}, known: map[string]bool{}}
}

func (d *switchDetector) set(ep string, saturated bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sat[ep], d.known[ep] = saturated, true
}

func (d *switchDetector) forget(ep string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.known, ep)
}

func (d *switchDetector) Saturation(ep kvroute.Endpoint) (bool, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sat[ep.ID], d.known[ep.ID]
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixture is a Controller on a Manual clock with a switch detector and its
// own registry.
type fixture struct {
	c     *Controller
	det   *switchDetector
	clock *telemetry.Manual
	reg   *prometheus.Registry
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{det: newSwitch(), clock: telemetry.NewManual(t0), reg: prometheus.NewRegistry()}
	c, err := New(cfg, Options{Set: telemetry.Set{Registerer: f.reg, Clock: f.clock}, Detectors: []Detector{f.det}})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	t.Cleanup(c.Close)
	return f
}

// result is one Admit's outcome, tagged by the test.
type result struct {
	tag string
	err error
}

// admit runs Admit in a goroutine and waits until it is queued (or
// returned); the outcome goes to out.
func (f *fixture) admit(t *testing.T, ctx context.Context, tag string, req *kvroute.Request, eps []kvroute.Endpoint, out chan<- result) {
	t.Helper()
	before := f.enqueued()
	returned := make(chan struct{})
	go func() {
		err := f.c.Admit(ctx, req, eps)
		close(returned)
		out <- result{tag, err}
	}()
	waitFor(t, func() bool {
		select {
		case <-returned:
			return true
		default:
			return f.enqueued() > before
		}
	})
}

// count reads kvroute_admission_requests_total{priority,outcome}.
func (f *fixture) count(priority, outcome string) float64 {
	return testutil.ToFloat64(f.c.met.outcomes.WithLabelValues(priority, outcome))
}

// waitFor polls cond with a generous deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(time.Millisecond)
	}
}

func ctxFor(objective, flow string) context.Context {
	ctx := context.Background()
	if objective != "" {
		ctx = WithObjective(ctx, objective)
	}
	if flow != "" {
		ctx = WithFairnessID(ctx, flow)
	}
	return ctx
}

func tokensReq(n int) *kvroute.Request {
	return &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: make([]uint32, n)}}}
}

var oneEP = []kvroute.Endpoint{{ID: "a:1"}}

// take receives the next outcome.
func take(t *testing.T, out <-chan result) result {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no outcome within 20s")
		return result{}
	}
}

// enqueued returns how many requests ever entered the queue.
func (f *fixture) enqueued() uint64 {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	return f.c.seq
}
