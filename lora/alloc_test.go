//go:build !race

package lora

import (
	"context"
	"testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
)

// The race detector allocates; this file runs without it.

// TestScoreDoesNotAllocate: the scorer adds no allocation to a Pick, with
// or without an adapter on the request.
func TestScoreDoesNotAllocate(t *testing.T) {
	src := newStatic()
	eps := endpoints(8)
	for _, ep := range eps {
		src.set(ep.ID, enginemetrics.LoRAInfo{Reported: true, Running: []string{"x"}, Waiting: []string{"y"}, MaxLoRA: 2}, true)
	}
	s, err := New(Config{}, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	with, without := testRouter(t, s.Weighted()), testRouter(t)
	for _, adapter := range []string{"", "x", "z"} {
		req := request(adapter, 512)
		pick := func(r *kvroute.Router) func() {
			return func() {
				d, err := r.Pick(context.Background(), req, eps)
				if err != nil {
					t.Fatal(err)
				}
				d.Done(kvroute.DoneInfo{})
			}
		}
		a, o := testing.AllocsPerRun(500, pick(with)), testing.AllocsPerRun(500, pick(without))
		if a > o {
			t.Fatalf("adapter %q: Pick with the scorer allocates %v times, without %v", adapter, a, o)
		}
	}
}
