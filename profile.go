package kvroute

import "context"

// Profile is the profile step: it picks a request in each of the roles it
// is served in, such as a decode endpoint and, in a disaggregated
// deployment, a prefill endpoint beside it. stages runs the pipeline's
// stages after the admission (render → keys → lookup → filter → score →
// pick → commit) over the candidates it is given; the profile calls it once
// per role, with that role's candidates, and returns the first role's
// Decision with the others in its Roles, so that the gateway's FirstChunk
// and Done on it release them all. It must be safe for concurrent use. The
// default picks in one role among every candidate.
//
// Each call to stages renders the request unless it carries Prompts, and
// refuses a Request.ID already in flight: pick the later roles with a copy
// of the request without ID: Router.Decision finds the first role's
// Decision by the ID, and ending it (or the request table dropping it) ends
// the others.
type Profile interface {
	Pick(ctx context.Context, req *Request, endpoints []Endpoint, stages Picker) (*Decision, error)
}

// singleRole is the default Profile: one role, every candidate.
type singleRole struct{}

// Pick runs the stages once over every candidate.
func (singleRole) Pick(ctx context.Context, req *Request, endpoints []Endpoint, stages Picker) (*Decision, error) {
	return stages.Pick(ctx, req, endpoints)
}

// stages is the Picker a Profile runs: the pipeline after the admission, for
// one role.
type stages struct{ r *Router }

// Pick runs match, filter, score, pick and commit for one role.
func (p stages) Pick(ctx context.Context, req *Request, endpoints []Endpoint) (*Decision, error) {
	s, err := p.r.match(ctx, req, endpoints)
	if err != nil {
		return nil, err
	}
	defer s.Release()
	best, _ := s.Score()
	if best < 0 {
		return nil, ErrNoEndpoints // the filters kept no candidate
	}
	return s.Commit(best)
}
