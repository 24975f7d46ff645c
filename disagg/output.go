package disagg

import (
	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/jsonscan"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/tokenload"
)

// outputTokens is the output tokens req is expected to generate: its
// body's cap (render.MaxTokens, past a byte order mark as forcesNamedTool
// reads it), else Config.DefaultOutputTokens, at most
// Config.DecodeQueueOutputTokens. A larger cap would weigh no more in the
// decode pick (the load share is capped at 1), and a client's
// max_tokens near the int64 limit would wrap the endpoint's sum negative:
// the busiest endpoint would look idle.
func (p *Profile) outputTokens(req *kvroute.Request) int64 {
	n, ok := render.MaxTokens(jsonscan.TrimBOM(req.Body))
	if !ok {
		n = p.cfg.DefaultOutputTokens
	}
	return min(n, p.cfg.DecodeQueueOutputTokens)
}

// chargeOutput charges d's endpoint n in-flight output tokens and one
// request in the Profile's decode-load tracker, released when d ends
// (kvroute.Decision.AtEnd: its Done, the request table's drop, or Release).
func (p *Profile) chargeOutput(d *kvroute.Decision, n int64) {
	h := p.out.Dispatch(d.Endpoint.ID, n)
	d.AtEnd(h.Done)
}

// DecodeLoad returns the decode endpoint's in-flight output tokens and
// requests as the Profile charged them: each request the Profile sent
// there, until it ended, with its expected output tokens. It is the load
// the decode pick weighs (with the router's open requests).
func (p *Profile) DecodeLoad(endpointID string) (outputTokens, requests int64) {
	t, r, _ := p.out.Load(endpointID)
	return t, r
}

// outputLoad is candidate id's in-flight output tokens.
func (p *Profile) outputLoad(id string) int64 {
	t, _, _ := p.out.Load(id)
	return t
}

// pruneOutput drops the tracker's idle counters (no request in flight) of
// endpoints not among endpoints, once it holds more than twice as many
// counters as there are candidates or as it kept at the last prune (plus a
// margin), so that endpoint churn cannot grow it without bound. endpoints
// are one pick's candidates, which the Router narrows to the request's
// model: an endpoint missing from them may still serve another model, so a
// counter with requests in flight is kept (it empties when they end, and
// goes at a later prune). What the tracker holds is therefore bounded by
// the requests in flight plus twice the largest candidate list. A request
// dispatched to an endpoint while its idle counter is removed releases the
// dropped counter: its load is missing from the view until it ends, never
// leaked.
func (p *Profile) pruneOutput(endpoints []kvroute.Endpoint) {
	if p.out.Len() <= 2*max(len(endpoints), int(p.pruneKept.Load()))+16 {
		return
	}
	p.pruneMu.Lock()
	defer p.pruneMu.Unlock()
	keep := make(map[string]struct{}, len(endpoints))
	for _, e := range endpoints {
		keep[e.ID] = struct{}{}
	}
	var gone []string
	p.out.Range(func(id string, _, requests int64) bool {
		if _, ok := keep[id]; !ok && requests <= 0 {
			gone = append(gone, id)
		}
		return true
	})
	for _, id := range gone {
		p.out.Remove(id)
	}
	p.pruneKept.Store(int64(p.out.Len()))
}

// newOutputTracker is the Profile's decode-load tracker: no metrics of its
// own (the router's tracker exports the open requests).
func newOutputTracker() *tokenload.Tracker {
	t, _ := tokenload.NewTracker(tokenload.Options{}) // without a Registerer it cannot fail
	return t
}
