package admission

import (
	"errors"
	"strings"
	"testing"
)

// A refusal says what was wrong under its sentinel error (errors.Is still
// tells the outcome): a request larger than the queue's byte bound, which
// no wait makes room for however empty the queue is, a queue that pushing
// out its sheddable requests would not make room in, a sheddable request
// pushed out for another, and a full dispatch gate. The gateway answers
// with the error's text, so the client and the operator see which bound
// refused the request.
func TestRefusalsNameTheirCause(t *testing.T) {
	f := newFixture(t, Config{MaxQueuedBytes: 1000, MaxQueuedRequests: 2, Objectives: gateObjectives})
	f.det.set("a:1", true)
	mustName := func(err, target error, parts ...string) {
		t.Helper()
		if !errors.Is(err, target) {
			t.Fatalf("err %v, want %v", err, target)
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("err %q does not name %q", err, p)
			}
		}
	}
	mustName(f.c.Admit(ctxFor("chat", ""), tokensReq(300), oneEP), ErrQueueFull, "1200 bytes", "maxQueuedBytes 1000")

	out := make(chan result, 4)
	// A released request's claim keeps a:1 from the queue without
	// saturating it, so that a sheddable request waits rather than is shed.
	f.admit(t, ctxFor("chat", ""), "chat0", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.c.Notify("")
	if r := take(t, out); r.tag != "chat0" || r.err != nil {
		t.Fatalf("got %s (%v), want chat0 released", r.tag, r.err)
	}
	f.admit(t, ctxFor("batch", ""), "batch", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("chat", ""), "chat1", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("chat", ""), "chat2", tokensReq(10), oneEP, out)
	r := take(t, out)
	if r.tag != "batch" {
		t.Fatalf("got %s (%v), want batch pushed out", r.tag, r.err)
	}
	mustName(r.err, ErrShed, "pushed out", "priority 1")
	mustName(f.c.Admit(ctxFor("chat", ""), tokensReq(10), oneEP), ErrQueueFull, "2 requests", "maxQueuedRequests 2")

	g := newGateFixture(t, Config{Headroom: Headroom{MaxHeld: 1}})
	g.sig.set("a:1", 9, 0.1, t0)
	g.hold(t, ctxFor("batch", ""), "held", epA, out)
	mustName(g.c.Hold(ctxFor("batch", ""), epA), ErrShed, "dispatch gate", "headroom.maxHeld 1")
}
