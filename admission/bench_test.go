package admission

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// benchRouter builds a Router without events or render (the prompt's tokens
// are supplied) whose index holds a different share of the prompt on each of
// n endpoints.
func benchRouter(b *testing.B, adm kvroute.Admission, prompt []uint32, n int) (*kvroute.Router, []kvroute.Endpoint) {
	b.Helper()
	cfg := kvroute.DefaultConfig()
	cfg.Model = "bench-model"
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	r, err := kvroute.New(context.Background(), cfg, kvroute.Options{Admission: adm})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	bs := r.Index().BlockSize()
	nb := len(prompt) / bs
	eps := make([]kvroute.Endpoint, n)
	for i := range eps {
		eps[i] = kvroute.Endpoint{ID: fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250)}
		held := 1 + i%nb
		hashes := make([]uint64, held)
		for j := range hashes {
			hashes[j] = uint64(i*1_000_000 + j + 1)
		}
		if err := r.Index().Store(eps[i].ID, &kvindex.StoreEvent{EngineHashes: hashes, Tokens: prompt[:held*bs],
			BlockSize: bs, Model: cfg.Model, Group: -1}); err != nil {
			b.Fatal(err)
		}
	}
	return r, eps
}

// BenchmarkPickThroughIdleAdmission alternates a Pick through an idle
// admission stage (nothing saturated, nothing queued) and a Pick on an
// identical Router without one, one call each per iteration in alternating
// order, and reports the medians, their ratio (with/without; the target is
// at most 1.05) and the extra allocations per Pick (the target is 0).
func BenchmarkPickThroughIdleAdmission(b *testing.B) {
	prompt := make([]uint32, 2048)
	for i := range prompt {
		prompt[i] = uint32(i + 1)
	}
	ctrl, err := New(Config{Objectives: []Objective{{Name: "chat", Priority: 1}}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ctrl.Close)
	with, eps := benchRouter(b, ctrl, prompt, 64)
	ctrl.SetLoad(with.Load())
	without, _ := benchRouter(b, nil, prompt, 64)
	req := &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: prompt}}}
	ctx := WithFairnessID(WithObjective(context.Background(), "chat"), "tenant-a")
	pick := func(r *kvroute.Router) {
		d, err := r.Pick(ctx, req, eps)
		if err != nil {
			b.Fatal(err)
		}
		d.Done(kvroute.DoneInfo{})
		ctrl.Notify(d.Endpoint.ID)
	}
	run := func(r *kvroute.Router) time.Duration {
		t0 := time.Now()
		pick(r)
		return time.Since(t0)
	}
	a := make([]time.Duration, 0, b.N)
	o := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			a = append(a, run(with))
			o = append(o, run(without))
		} else {
			o = append(o, run(without))
			a = append(a, run(with))
		}
	}
	b.StopTimer()
	allocsWith := testing.AllocsPerRun(200, func() { pick(with) })
	allocsWithout := testing.AllocsPerRun(200, func() { pick(without) })
	slices.Sort(a)
	slices.Sort(o)
	ma, mo := a[len(a)/2], o[len(o)/2]
	b.ReportMetric(float64(ma.Nanoseconds()), "admission-p50-ns/pick")
	b.ReportMetric(float64(mo.Nanoseconds()), "plain-p50-ns/pick")
	b.ReportMetric(float64(ma)/float64(mo), "with/without")
	b.ReportMetric(allocsWith-allocsWithout, "extra-allocs/pick")
}

// dispatchRig is a Controller with n requests queued in 3 bands of 100
// flows each over one endpoint; step releases one request (Notify drops the
// endpoint's claim, a pass dispatches one and claims it again) and queues a
// new one in its place.
type dispatchRig struct {
	c     *Controller
	eps   []kvroute.Endpoint
	flows []string
	n     int
}

func newDispatchRig(b *testing.B, fair Fairness, queued int) *dispatchRig {
	det := newSwitch()
	c, err := New(Config{
		Fairness:     fair,
		Objectives:   []Objective{{Name: "p2", Priority: 2}, {Name: "p1", Priority: 1}, {Name: "p0", Priority: 0}},
		QueueTimeout: time.Hour,
	}, Options{Set: telemetry.Set{Clock: telemetry.NewManual(time.Unix(0, 0))}, Detectors: []Detector{det}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	r := &dispatchRig{c: c, eps: []kvroute.Endpoint{{ID: "a:1"}}, flows: make([]string, 100)}
	for i := range r.flows {
		r.flows[i] = fmt.Sprintf("tenant-%d", i)
	}
	det.set("a:1", true)
	for range queued {
		r.push()
	}
	det.set("a:1", false)
	return r
}

func (r *dispatchRig) push() {
	c := r.c
	w := &waiter{eps: r.eps, idx: -1, cost: int64(100 + r.n%700), bytes: 400, done: make(chan error, 1), ctx: context.Background()}
	c.mu.Lock()
	c.seq++
	w.seq, w.enqueued, w.deadline = c.seq, c.clock.Now(), c.clock.Now().Add(time.Hour)
	c.bands[r.n%3].push(w, r.flows[r.n%100], false, c.cfg.Fairness == DeficitRoundRobin)
	c.queued.Add(1)
	c.bytes += w.bytes
	c.mu.Unlock()
	r.n++
}

func (r *dispatchRig) step() time.Duration {
	t0 := time.Now()
	r.c.Notify("a:1")
	d := time.Since(t0)
	r.push()
	return d
}

// BenchmarkDispatchWith10000Queued measures the queue's cost per dispatched
// request with 10,000 requests waiting in 3 bands of 100 flows, against the
// floor of the same queue holding 300 (one per flow), alternating one
// dispatch of each per iteration. It reports the medians and their ratio.
// A pass looks at the first request of every flow, so the cost grows with
// the number of flows, not with the number queued.
func BenchmarkDispatchWith10000Queued(b *testing.B) {
	for _, fair := range []Fairness{RoundRobin, DeficitRoundRobin} {
		b.Run(string(fair), func(b *testing.B) {
			big, floor := newDispatchRig(b, fair, 10000), newDispatchRig(b, fair, 300)
			db := make([]time.Duration, 0, b.N)
			df := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%2 == 0 {
					db = append(db, big.step())
					df = append(df, floor.step())
				} else {
					df = append(df, floor.step())
					db = append(db, big.step())
				}
			}
			b.StopTimer()
			if q := big.c.Queued(); q != 10000 {
				b.Fatalf("queued %d, want 10000", q)
			}
			slices.Sort(db)
			slices.Sort(df)
			mb, mf := db[len(db)/2], df[len(df)/2]
			b.ReportMetric(float64(mb.Nanoseconds()), "10000-queued-p50-ns/dispatch")
			b.ReportMetric(float64(mf.Nanoseconds()), "300-queued-p50-ns/dispatch")
			b.ReportMetric(float64(mb)/float64(mf), "10000/300")
		})
	}
}
