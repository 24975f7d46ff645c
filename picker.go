package kvroute

import (
	"context"
	"errors"

	"github.com/kvroute/kvroute/affinity"
)

// Picker is the small interface a gateway uses: one call per request, which
// returns the endpoint to forward the request to. The gateway then reports the
// request's first response chunk and its end on the returned Decision.
type Picker interface {
	// Pick chooses one of endpoints for req. It fails when no endpoint can
	// be chosen (an empty candidate list or a cancelled context) and, for a
	// Router, on the mistakes that would route without cache information
	// (ErrEndpointsNotSet, ErrNoAPI, ErrModelMismatch), a request ID that
	// is invalid or already in flight, and the admission's refusal
	// (Options.Admission); a failed render is not an error: the request is
	// routed by load alone and the Decision says so.
	Pick(ctx context.Context, req *Request, endpoints []Endpoint) (*Decision, error)
}

// ErrNoEndpoints is returned by Pick when the candidate list is empty.
var ErrNoEndpoints = errors.New("kvroute: no candidate endpoints")

// Pick chooses an endpoint for req among endpoints: the request's checks,
// the admission (Options.Admission), then the profile step
// (Options.Profile), which runs the stages once per role (by default once:
// render → keys → lookup → filter → score → pick → commit). See Router for
// the pipeline and Selection for running its stages one at a time. A render
// failure does not fail Pick: the request is routed by load alone, the
// failure is counted and Decision.RenderErr says so. A pick that would
// commit to an ID SetEndpoints would refuse (empty, over 259 bytes, not
// UTF-8: the chosen ID, or a fallback's, labels the per-endpoint series)
// fails with an ErrInvalidConfig naming it (see Selection.Commit).
func (r *Router) Pick(ctx context.Context, req *Request, endpoints []Endpoint) (*Decision, error) {
	endpoints, err := r.admit(ctx, req, endpoints)
	if err != nil {
		return nil, err
	}
	d, err := r.pipe.profile.Pick(ctx, req, endpoints, stages{r})
	d.handOver() // the profile is done with it: the request table may end it now
	if err != nil {
		r.abandon(ctx)
		return d, err
	}
	countFallback(r, d)
	return d, nil
}

// pipeline is what New assembles the Router's stages from: the extension
// points, with the defaults where Options sets none.
type pipeline struct {
	admission Admission
	profile   Profile
	filters   []Filter         // Options.Filters, then the affinity filter
	scorers   []WeightedScorer // the token-load scorer, then Options.Scorers
	// tiePerToken is the tied score difference per uncached token of the
	// best candidate: Config.LoadTieTolerance × LoadWeight /
	// QueueThresholdTokens; 0 ties only equal scores (pick.go).
	tiePerToken float64
}

// newPipeline assembles the pipeline from cfg (with New's defaults applied),
// opts and the affinity filter.
func newPipeline(cfg Config, opts Options, af *affinity.Filter) pipeline {
	p := pipeline{admission: opts.Admission, profile: opts.Profile}
	if p.admission == nil {
		p.admission = admitAll{}
	}
	if p.profile == nil {
		p.profile = singleRole{}
	}
	p.filters = append(append(p.filters, opts.Filters...), affinityFilter{af})
	p.scorers = append(p.scorers, WeightedScorer{
		Scorer: tokenLoadScorer{queueThreshold: cfg.QueueThresholdTokens, openRequestTokens: *cfg.OpenRequestTokens},
		Weight: cfg.LoadWeight,
	})
	p.scorers = append(p.scorers, opts.Scorers...)
	p.tiePerToken = cfg.LoadTieTolerance * cfg.LoadWeight / float64(cfg.QueueThresholdTokens)
	return p
}
