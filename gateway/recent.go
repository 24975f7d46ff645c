package gateway

import (
	"time"

	"github.com/kvroute/kvroute/internal/usage"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/recent"
	"github.com/kvroute/kvroute/render"
)

// DecisionRecord is one routed request as the status page shows it.
type DecisionRecord struct {
	Time time.Time
	// RequestID is the client's X-Request-Id, or the ID the gateway gave
	// the request (and the engine) when it came without one; cut to 256
	// bytes (kvroute_gateway_status_truncated_total counts the records cut).
	RequestID string
	API       render.API
	// Model is the model the request named (the gateway's model when it
	// named none), cut to 256 bytes like RequestID; LoRA reports that it
	// was routed as a LoRA adapter.
	Model           string
	LoRA            bool
	Endpoint        string
	PromptTokens    int
	PredictedCached int
	// ActualCached is the engine's reported cached tokens; -1 when not
	// observed.
	ActualCached int
	// Error is the prediction error of the observation (predicted, capped
	// at what the engine can reuse, minus actual).
	Error     int
	Outcome   string
	UsedCache bool
	// CacheMode is where the prediction came from: precise, approximate
	// or blind (kvroute.Decision.CacheMode).
	CacheMode string
	Result    Result
}

// clipRecord cuts d's texts from the client (request ID, model) to
// recent.MaxText bytes before the status page keeps it; it reports whether
// it cut any.
func clipRecord(d *DecisionRecord) bool {
	var c1, c2 bool
	d.RequestID, c1 = recent.Clip(d.RequestID)
	d.Model, c2 = recent.Clip(d.Model)
	return c1 || c2
}

// Recent returns the handler's latest routed requests (up to 16), newest
// first.
func (h *Handler) Recent() []DecisionRecord { return h.recent.List() }

// finish ends a successful request with the cached tokens the engine
// reported in the response's usage, which closes the router's accuracy
// loop; without them the handler's own Done ends it.
func (h *Handler) finish(d *kvroute.Decision, us *usage.Scanner, rec *DecisionRecord) {
	cached, result := us.Result()
	h.met.usage[result].Inc()
	if result != usage.Observed {
		return
	}
	if o, ok := d.Done(kvroute.DoneInfo{CachedTokens: cached, HasCachedTokens: true}); ok {
		rec.ActualCached, rec.Error = cached, o.Error
		h.history.add(h.now(), d.PromptTokens, o.Predicted, o.Actual)
	}
}
