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
	cfg.Events.Enabled = false
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

// BenchmarkDispatchWith10000Queued measures the queue's cost per request
// with 10,000 requests waiting in 3 bands of 100 flows each: per iteration
// one release dispatches one request and one new request is queued in its
// place, so the queue stays at 10,000.
func BenchmarkDispatchWith10000Queued(b *testing.B) {
	for _, fair := range []Fairness{RoundRobin, DeficitRoundRobin} {
		b.Run(string(fair), func(b *testing.B) {
			det := newSwitch()
			c, err := New(Config{
				Fairness:     fair,
				Objectives:   []Objective{{Name: "p2", Priority: 2}, {Name: "p1", Priority: 1}, {Name: "p0", Priority: 0}},
				QueueTimeout: time.Hour,
			}, Options{Set: telemetry.Set{Clock: telemetry.NewManual(time.Unix(0, 0))}, Detectors: []Detector{det}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			eps := []kvroute.Endpoint{{ID: "a:1"}}
			det.set("a:1", true)
			flows := make([]string, 100)
			for i := range flows {
				flows[i] = fmt.Sprintf("tenant-%d", i)
			}
			n := 0
			push := func() {
				w := &waiter{eps: eps, idx: -1, cost: int64(100 + n%700), bytes: 400, done: make(chan error, 1)}
				c.mu.Lock()
				c.seq++
				w.seq, w.enqueued, w.deadline = c.seq, c.clock.Now(), c.clock.Now().Add(time.Hour)
				c.bands[n%3].push(w, flows[n%100], false)
				c.queued.Add(1)
				c.bytes += w.bytes
				c.mu.Unlock()
				n++
			}
			for range 10000 {
				push()
			}
			det.set("a:1", false)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.Notify("a:1") // drops the claim, dispatches one, claims again
				push()
			}
			b.StopTimer()
			if q := c.Queued(); q != 10000 {
				b.Fatalf("queued %d, want 10000", q)
			}
		})
	}
}
