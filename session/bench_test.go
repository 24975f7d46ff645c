package session_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
)

// BenchmarkPick compares Pick on a router without session affinity (the
// floor), with it and no session key, and with a known session's key;
// each reports its ns/op ratio to the floor measured in the same run.
func BenchmarkPick(b *testing.B) {
	plain := newPlainRouter(b, 8)
	f := newFixture(b, session.Config{}, 8)
	toks := prompt(1, 2048)
	run := func(b *testing.B, r *kvroute.Router, eps []kvroute.Endpoint, hdr http.Header) {
		req := &kvroute.Request{Header: hdr, Prompts: []render.Prompt{{TokenIDs: toks}}}
		ctx := context.Background()
		for range 200 { // warm: the index's speculative entries, the pools
			req.Session = ""
			d, _ := r.Pick(ctx, req, eps)
			d.Done(kvroute.DoneInfo{})
			d.Release()
		}
		b.ReportAllocs()
		for b.Loop() {
			req.Session = ""
			d, err := r.Pick(ctx, req, eps)
			if err != nil || d.Endpoint.ID == "" {
				b.Fatal(err)
			}
			d.Done(kvroute.DoneInfo{})
			d.Release()
		}
	}
	var floor float64
	for _, c := range []struct {
		name string
		r    *kvroute.Router
		eps  []kvroute.Endpoint
		hdr  http.Header
	}{
		{"plain", plain.r, plain.eps, nil},
		{"session_no_key", f.r, f.eps, nil},
		{"session_key", f.r, f.eps, header("X-Session-Id", "conv-1")},
	} {
		b.Run(c.name, func(b *testing.B) {
			run(b, c.r, c.eps, c.hdr)
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if c.name == "plain" {
				floor = ns
			} else if floor > 0 {
				b.ReportMetric(ns/floor, "x_plain")
			}
		})
	}
	if n, ok := f.a.Endpoint("conv-1"); !ok || n == "" {
		b.Fatal("the session was not recorded")
	}
}

type plainRouter struct {
	r   *kvroute.Router
	eps []kvroute.Endpoint
}

func newPlainRouter(b *testing.B, n int) plainRouter {
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	r, err := kvroute.New(context.Background(), rc, kvroute.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	var eps []kvroute.Endpoint
	for i := range n {
		eps = append(eps, kvroute.Endpoint{ID: fmt.Sprintf("10.0.0.%d:8000", i+1)})
	}
	if err := r.SetEndpoints(eps); err != nil {
		b.Fatal(err)
	}
	return plainRouter{r, eps}
}
