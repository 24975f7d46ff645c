//go:build !race

package admission

import (
	"testing"

	"github.com/kvroute/kvroute"
)

// The race detector allocates; this file runs without it.

func TestIdleAdmitDoesNotAllocate(t *testing.T) {
	f := newFixture(t, Config{Objectives: []Objective{{Name: "chat", Priority: 1}}})
	f.c.SetLoad(newTracker(t))
	ctx := WithFairnessID(ctxFor("chat", ""), "tenant")
	req := tokensReq(100)
	eps := []kvroute.Endpoint{{ID: "a:1"}, {ID: "b:1"}}
	if n := testing.AllocsPerRun(1000, func() {
		if err := f.c.Admit(ctx, req, eps); err != nil {
			t.Fatal(err)
		}
		f.c.Notify("a:1")
	}); n != 0 {
		t.Fatalf("idle Admit+Notify allocates %v times, want 0", n)
	}
}

func TestHoldOfHigherBandDoesNotAllocate(t *testing.T) {
	f := newFixture(t, Config{Objectives: []Objective{{Name: "chat", Priority: 1}}})
	ctx := ctxFor("chat", "tenant")
	ep := kvroute.Endpoint{ID: "a:1"}
	if n := testing.AllocsPerRun(1000, func() {
		if err := f.c.Hold(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Hold of a priority >= 0 request allocates %v times, want 0", n)
	}
}
