package admission

import (
	"context"
	"errors"
	"testing"

	"github.com/kvroute/kvroute"
)

// A queued request that leaves (its caller gave up, or its deadline
// passed) serves the queue and the dispatch gate at once: what it kept
// back, the next request of its flow, whose candidate is free, or a
// sheddable request held at the gate for it, goes then rather than at the
// next re-check or Notify.
func TestLeavingRequestServesWhatItKeptBack(t *testing.T) {
	t.Run("its flow", func(t *testing.T) {
		f := newFixture(t, Config{})
		f.det.set("a:1", true)
		ctx, cancel := context.WithCancel(ctxFor("", "A"))
		out := make(chan result, 2)
		f.admit(t, ctx, "head", tokensReq(10), oneEP, out)
		f.admit(t, ctxFor("", "A"), "next", tokensReq(10), []kvroute.Endpoint{{ID: "b:1"}}, out)
		if f.c.Queued() != 2 {
			t.Fatalf("queued %d, want 2: a flow's requests leave in order", f.c.Queued())
		}
		cancel()
		// The two callers return on their own goroutines, in either order.
		got := map[string]error{}
		for range 2 {
			r := take(t, out)
			got[r.tag] = r.err
		}
		if err, ok := got["head"]; !ok || !errors.Is(err, context.Canceled) {
			t.Fatalf("head: %v (returned %v), want cancelled", err, ok)
		}
		if err, ok := got["next"]; !ok || err != nil {
			t.Fatalf("next: %v (returned %v), want dispatched", err, ok)
		}
		if q := f.c.Queued(); q != 0 {
			t.Fatalf("queued %d once the head left, want 0: the next request's candidate is free", q)
		}
	})
	t.Run("the gate", func(t *testing.T) {
		g := newGateFixture(t, Config{})
		b1 := kvroute.Endpoint{ID: "b:1"}
		g.sig.set(b1.ID, 0, 0.1, t0) // the engine has headroom
		g.det.set(b1.ID, true)       // the interactive request's only candidate is saturated
		ctx, cancel := context.WithCancel(ctxFor("chat", "t"))
		qout := make(chan result, 1)
		g.admit(t, ctx, "chat", tokensReq(10), []kvroute.Endpoint{b1}, qout)
		out := make(chan result, 1)
		g.hold(t, ctxFor("batch", ""), "batch", b1, out)
		if g.c.Held() != 1 {
			t.Fatalf("held %d, want 1 while the interactive request is queued", g.c.Held())
		}
		cancel()
		if r := take(t, qout); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("interactive: %v, want cancelled", r.err)
		}
		if h := g.c.Held(); h != 0 {
			t.Fatalf("held %d once the interactive request left, want 0", h)
		}
		if r := take(t, out); r.err != nil {
			t.Fatalf("batch: %v, want sent", r.err)
		}
	})
}
