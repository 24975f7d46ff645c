package admission

import (
	"context"
	"sync"
	"time"
)

// maxNameLen bounds objective names and fairness IDs; longer fairness IDs
// are cut to it (see WithFairnessID).
const maxNameLen = 256

type ctxKey uint8

const (
	objectiveKey ctxKey = iota
	fairnessKey
	deadlineKey
	recordKey
)

// WithObjective returns ctx carrying the request's objective name, which
// the Controller maps to a priority (Config.Objectives). Hosts set it from
// x-gateway-inference-objective before calling Pick. The admission inputs
// travel in the context rather than in kvroute.Request so that hosts without
// admission carry nothing.
func WithObjective(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, objectiveKey, name)
}

// WithFairnessID returns ctx carrying the request's fairness ID: requests of
// one band share dispatches fairly between fairness IDs (flows). Only the
// ID's first 256 bytes name its flow: a longer ID, which comes from a
// client, is cut to them so that the flows' keys stay small, and two IDs
// that share them are one flow. Nothing is refused or counted for it; a
// host whose clients send longer IDs maps them to shorter ones (a hash)
// first.
func WithFairnessID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, fairnessKey, id)
}

// WithDeadline returns ctx carrying the latest time the request may still
// leave the queue; it replaces the objective's queue timeout. It does not
// end ctx: a request dispatched before it continues normally.
func WithDeadline(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, deadlineKey, t)
}

// Track returns ctx carrying a record of the request's way through the
// admission: Admit notes in it when the request arrived and the queued
// request it released, and Hold, called with the same context after the
// pick, reads them. With it, the request's whole wait, in the queue and
// then at the dispatch gate, is bounded by one queue timeout counted from
// its arrival to Admit, and the claim its release took (on one of its
// free candidates) is dropped as soon as Hold learns which endpoint the
// pick chose (or as soon as the pick fails, Abandon). Without it, Hold
// counts the queue timeout again from its own call and the claim lapses
// by itself, at the latest when the request's context ends (see the
// package doc). FromHeader
// calls it; hosts that build the context otherwise call it once per
// request, before Pick.
func Track(ctx context.Context) context.Context {
	return context.WithValue(ctx, recordKey, &record{})
}

// record is a request's way through the admission (Track). Admit and Hold
// run one after the other on the request's goroutine, but a host may hand
// the context around, so its fields are guarded by mu.
type record struct {
	mu       sync.Mutex
	arrived  time.Time // when Admit was called, zero before
	released *waiter   // the queued request Admit released, until Hold or Abandon hands its claim off
}

// arrive notes the request's arrival to Admit and returns an earlier
// Admit's release (a host that picks again with the same context), nil if
// none: that pick is over, and its claim is the caller's to give back.
func (r *record) arrive(now time.Time) (earlier *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrived = now
	earlier, r.released = r.released, nil
	return earlier
}

// release notes that Admit released w from the queue. Its claim goes when
// Hold or Abandon hands it off (picked), or when the request's context
// ends (the claim watches it, claimLocked), whichever comes first.
func (r *record) release(w *waiter) {
	r.mu.Lock()
	r.released = w
	r.mu.Unlock()
}

// picked returns the request's arrival to Admit (zero when Admit did not
// run) and the queued request it released (nil when it was admitted without
// waiting), forgetting the latter: the pick is known, its claim is handed off once.
func (r *record) picked() (arrived time.Time, released *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	arrived, released, r.released = r.arrived, r.released, nil
	return arrived, released
}

func recordOf(ctx context.Context) *record {
	r, _ := ctx.Value(recordKey).(*record)
	return r
}

func objectiveOf(ctx context.Context) string {
	s, _ := ctx.Value(objectiveKey).(string)
	return s
}

func fairnessOf(ctx context.Context) string {
	s, _ := ctx.Value(fairnessKey).(string)
	if len(s) > maxNameLen {
		s = s[:maxNameLen]
	}
	return s
}

func deadlineOf(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(deadlineKey).(time.Time)
	return t, ok
}
