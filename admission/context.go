package admission

import (
	"context"
	"time"
)

// maxNameLen bounds objective names and fairness IDs; longer fairness IDs
// are cut to it.
const maxNameLen = 256

type ctxKey uint8

const (
	objectiveKey ctxKey = iota
	fairnessKey
	deadlineKey
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
// one band share dispatches fairly between fairness IDs (flows).
func WithFairnessID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, fairnessKey, id)
}

// WithDeadline returns ctx carrying the latest time the request may still
// leave the queue; it replaces the objective's queue timeout. It does not
// end ctx: a request dispatched before it continues normally.
func WithDeadline(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, deadlineKey, t)
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
