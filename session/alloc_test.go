//go:build !race

package session_test

import (
	"context"
	"testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
)

// The race detector allocates; this file runs without it.

// A request without a session key costs the pick path no allocation: the
// same count as a router without session affinity (whose released
// Decisions are reused, so it allocates none either).
func TestNoKeyPickDoesNotAllocate(t *testing.T) {
	f := newFixture(t, session.Config{}, 4)
	req := &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: prompt(1, 512)}}}
	ctx := context.Background()
	n := testing.AllocsPerRun(500, func() {
		req.Session = ""
		d, err := f.r.Pick(ctx, req, f.eps)
		if err != nil {
			t.Fatal(err)
		}
		d.Done(kvroute.DoneInfo{})
		d.Release()
	})
	if n != 0 {
		t.Fatalf("a pick without a session key allocates %v times, want 0", n)
	}
}

// A known session's turn allocates nothing either: the key comes from the
// header as is, the store's entry is updated in place.
func TestKnownSessionPickDoesNotAllocate(t *testing.T) {
	f := newFixture(t, session.Config{}, 4)
	req := &kvroute.Request{Header: header("X-Session-Id", "conv-42"), Prompts: []render.Prompt{{TokenIDs: prompt(1, 512)}}}
	ctx := context.Background()
	n := testing.AllocsPerRun(500, func() {
		req.Session = ""
		d, err := f.r.Pick(ctx, req, f.eps)
		if err != nil {
			t.Fatal(err)
		}
		d.Done(kvroute.DoneInfo{})
		d.Release()
	})
	if n != 0 {
		t.Fatalf("a known session's pick allocates %v times, want 0", n)
	}
}
