package kvroute

import (
	"context"

	"github.com/kvroute/kvroute/render"
)

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
// the others. Append the other roles' Decisions to its Roles before
// returning it: until Pick returns, the router leaves a Decision committed
// with an ID to the profile (Router.Decision does not find it, and the
// request table's drop waits for Pick's return, then ends every role), so
// no role is missed whatever ends the request, and when. A Decision the
// profile commits and does not return (it failed after the commit) it ends
// with Done itself.
//
// The stages a Router passes also have the method
//
//	Match(ctx context.Context, req *Request, endpoints []Endpoint) (*Selection, error)
//
// (the Router's Match without a second admission), for a profile that
// reads each role's candidates before it commits (package disagg decides
// from the decode candidate's cached prefix whether to pick a prefill
// endpoint at all), and
//
//	Prompts(s *Selection) (prompts []render.Prompt, cacheSalt string)
//
// which hands the prompts s rendered (valid until s is released) to the
// next role's Request.Prompts, so that the request is rendered once. A
// profile reaches them through an interface of its own.
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

// Match is Router.Match without the admission (Pick has admitted the
// request): render → keys → lookup over one role's candidates.
func (p stages) Match(ctx context.Context, req *Request, endpoints []Endpoint) (*Selection, error) {
	s, err := p.r.match(ctx, req, endpoints)
	if err != nil {
		return nil, err
	}
	s.inProfile = true
	return s, nil
}

// Prompts returns the prompts s rendered (or was given) and their cache
// salt; nil when the request could not be rendered. They stay valid until s
// is released.
func (p stages) Prompts(s *Selection) ([]render.Prompt, string) {
	if s.renderErr != nil {
		return nil, ""
	}
	return s.prompts, s.salt
}

// Pick runs match, filter, score, pick and commit for one role.
func (p stages) Pick(ctx context.Context, req *Request, endpoints []Endpoint) (*Decision, error) {
	s, err := p.Match(ctx, req, endpoints)
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
