package admission_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/render"
)

// busyEngine stands in for an enginemetrics.Scraper: its engine reports
// three waiting requests.
type busyEngine struct{}

func (busyEngine) Signal(kvroute.Endpoint) (enginemetrics.Signal, bool) {
	return enginemetrics.Signal{Waiting: 3, KVCacheUsage: 0.4, Scraped: time.Unix(0, 0)}, true
}

// The dispatch gate between the pick and the send: with the picked
// engine's queue not empty, a chat request (priority 1) is sent at once,
// and a batch request (sheddable) waits at the gateway instead of in the
// engine's queue, here until its queue deadline.
func ExampleController_Hold() {
	ctrl, err := admission.New(admission.Config{
		Objectives: []admission.Objective{
			{Name: "chat", Priority: 1},
			{Name: "batch", Priority: -1, QueueTimeout: 10 * time.Millisecond},
		},
	}, admission.Options{Signals: busyEngine{}})
	if err != nil {
		panic(err)
	}
	defer ctrl.Close()

	cfg := kvroute.DefaultConfig()
	cfg.Model = "my-model"
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{Admission: ctrl})
	if err != nil {
		panic(err)
	}
	defer router.Close()
	ctrl.SetLoad(router.Load())
	eps := []kvroute.Endpoint{{ID: "10.0.0.1:8000"}}

	for _, objective := range []string{"chat", "batch"} {
		ctx := admission.WithObjective(context.Background(), objective)
		req := &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: make([]uint32, 256)}}}
		d, err := router.Pick(ctx, req, eps)
		if err != nil {
			panic(err)
		}
		err = ctrl.Hold(ctx, d.Endpoint) // nil: send the request to d.Endpoint
		d.Done(kvroute.DoneInfo{Err: err})
		ctrl.Notify(d.Endpoint.ID)
		fmt.Printf("%s: sent %v, expired %v\n", objective, err == nil, errors.Is(err, admission.ErrExpired))
	}
	// Output:
	// chat: sent true, expired false
	// batch: sent false, expired true
}
