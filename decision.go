package kvroute

import (
	"sync/atomic"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/tokenload"
)

// Decision is the router's answer for one request: where to send it, what the
// router predicted, and the lifecycle hooks the gateway must call so that the
// in-flight load accounting stays exact.
//
// The gateway calls FirstChunk when the first bytes of the response arrive
// (this releases the request's prompt tokens from the endpoint's committed
// load) and Done when the response ends, fails or is aborted (this releases
// the request itself). Both are idempotent and safe to call from any
// goroutine; Done without FirstChunk releases everything. A host that keeps
// only the request's ID calls Router.FirstChunk and Router.Done with it
// instead; the two ways may be mixed and each release still happens once.
type Decision struct {
	// Endpoint is the chosen endpoint.
	Endpoint Endpoint
	// PromptTokens is the number of prompt tokens (summed over prompts); 0
	// when rendering failed.
	PromptTokens int
	// CachedTokens is the number of prompt tokens the index predicts the
	// chosen endpoint holds: contiguous cached blocks × block size.
	CachedTokens int
	// UncachedTokens is the load the request added to the endpoint: the
	// prompt tokens the endpoint is expected to compute.
	UncachedTokens int64
	// UsedCache reports whether cache information took part in the decision:
	// the request was tokenized and at least one candidate held part of it.
	UsedCache bool
	// Outcome is the affinity filter's decision (sticky, no_match,
	// load_override, ...); not_applicable when the Selection was committed
	// without running Filter.
	Outcome affinity.Outcome
	// RenderErr is the render failure when the request could not be
	// tokenized; the decision was then made by load alone.
	RenderErr error
	// Score is the chosen endpoint's total score (0 when it was not scored).
	Score float64

	inflight tokenload.Inflight
	table    *tokenload.RequestTable // where the request is filed under id; nil without an ID
	id       string
	acc      *accuracy // the router's closed loop
	observed atomic.Bool
}

// FirstChunk records that the first response chunk arrived: the endpoint has
// finished the request's prefill, so its prompt tokens leave the committed
// load.
func (d *Decision) FirstChunk() {
	if d == nil {
		return
	}
	d.inflight.FirstChunk()
}

// Done records the end of the request, successful or not (err is the
// request's failure, nil on success; it is accepted for symmetry with
// gateways' error paths and is not otherwise interpreted). Anything the
// request still held is released and its ID, if any, leaves the router's
// request table; later calls do nothing.
func (d *Decision) Done(err error) {
	if d == nil {
		return
	}
	d.inflight.Done()
	if d.table != nil {
		d.table.Forget(d.id, &d.inflight)
		if d.acc != nil {
			d.acc.forget(d.id, d)
		}
	}
}
