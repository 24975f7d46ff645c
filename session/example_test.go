package session_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
)

// A router with session affinity: the scorer in Options.Scorers, the
// profile in Options.Profile. Three turns of one conversation, with
// nothing cached anywhere yet, go to one endpoint.
func Example() {
	aff, err := session.New(session.Config{}, session.Options{})
	if err != nil {
		panic(err)
	}
	defer aff.Close()
	cfg := kvroute.DefaultConfig()
	cfg.Model = "my-model"
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	r, err := kvroute.New(context.Background(), cfg, kvroute.Options{
		Scorers: []kvroute.WeightedScorer{aff.Scorer()},
		Profile: aff.Profile(nil),
	})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	eps := []kvroute.Endpoint{{ID: "a:8000"}, {ID: "b:8000"}, {ID: "c:8000"}}
	_ = r.SetEndpoints(eps)

	seen := map[string]bool{}
	for turn := range 3 {
		tokens := make([]uint32, 256)
		for i := range tokens {
			tokens[i] = uint32(turn*10_000 + i) // no block in common with another turn
		}
		hdr := http.Header{"X-Session-Id": {"conversation-1"}}
		d, err := r.Pick(context.Background(), &kvroute.Request{Header: hdr, Prompts: []render.Prompt{{TokenIDs: tokens}}}, eps)
		if err != nil {
			panic(err)
		}
		seen[d.Endpoint.ID] = true
		d.Done(kvroute.DoneInfo{})
	}
	ep, _ := aff.Endpoint("conversation-1")
	fmt.Println("endpoints used:", len(seen), "remembered:", seen[ep])
	// Output:
	// endpoints used: 1 remembered: true
}
