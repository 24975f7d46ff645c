package disagg

import (
	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/tokenload"
)

// outputTokens is the output tokens req is expected to generate: its
// body's cap (render.MaxTokens), else Config.DefaultOutputTokens.
func (p *Profile) outputTokens(req *kvroute.Request) int64 {
	if n, ok := render.MaxTokens(req.Body); ok {
		return n
	}
	return p.cfg.DefaultOutputTokens
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

// pruneOutput drops the tracker's counters of endpoints no longer among
// endpoints once it holds more than twice as many as there are (plus a
// margin), so that endpoint churn cannot grow it without bound. A request
// still charged to a pruned endpoint releases its own counters, which are
// no longer looked up.
func (p *Profile) pruneOutput(endpoints []kvroute.Endpoint) {
	if p.out.Len() <= 2*len(endpoints)+16 {
		return
	}
	p.pruneMu.Lock()
	defer p.pruneMu.Unlock()
	keep := make(map[string]struct{}, len(endpoints))
	for _, e := range endpoints {
		keep[e.ID] = struct{}{}
	}
	var gone []string
	p.out.Range(func(id string, _, _ int64) bool {
		if _, ok := keep[id]; !ok {
			gone = append(gone, id)
		}
		return true
	})
	for _, id := range gone {
		p.out.Remove(id)
	}
}

// newOutputTracker is the Profile's decode-load tracker: no metrics of its
// own (the router's tracker exports the open requests).
func newOutputTracker() *tokenload.Tracker {
	t, _ := tokenload.NewTracker(tokenload.Options{}) // without a Registerer it cannot fail
	return t
}
