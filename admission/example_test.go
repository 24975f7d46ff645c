package admission_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/render"
)

// A Router with an admission stage: a chat objective (priority 1) and a
// sheddable batch objective (priority -1). The one endpoint saturates at one
// open request; while it is saturated, batch traffic is shed and chat
// traffic waits for a release.
func Example() {
	ctrl, err := admission.New(admission.Config{
		Objectives: []admission.Objective{
			{Name: "chat", Priority: 1},
			{Name: "batch", Priority: -1},
		},
		Saturation: admission.Saturation{MaxPrefillBacklog: -1, MaxOpenRequests: 1},
	}, admission.Options{})
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
	ctrl.SetLoad(router.Load()) // the own accounting reads the Router's load

	eps := []kvroute.Endpoint{{ID: "10.0.0.1:8000"}}
	req := func() *kvroute.Request {
		return &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: make([]uint32, 4096)}}}
	}
	chat := admission.WithObjective(context.Background(), "chat")
	batch := admission.WithObjective(context.Background(), "batch")

	first, err := router.Pick(chat, req(), eps) // nothing saturated: admitted at once
	fmt.Println("first chat:", err)

	_, err = router.Pick(batch, req(), eps) // saturated: sheddable is shed
	fmt.Println("batch:", errors.Is(err, admission.ErrShed))

	second := make(chan error)
	go func() {
		d, err := router.Pick(chat, req(), eps) // saturated: waits
		if err == nil {
			d.Done(kvroute.DoneInfo{})
		}
		second <- err
	}()
	for ctrl.Queued() == 0 {
		runtime.Gosched() // until the second chat request is queued
	}
	first.Done(kvroute.DoneInfo{}) // the first request ends
	ctrl.Notify(first.Endpoint.ID) // and the host says so
	fmt.Println("second chat:", <-second)
	// Output:
	// first chat: <nil>
	// batch: true
	// second chat: <nil>
}
