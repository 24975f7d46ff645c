package kvroute

import "context"

// Admission is the admission step, the pipeline's first: it decides whether
// a request is routed now. Admit returns nil to admit req, may block until
// it can (a flow-control queue waiting for capacity; it must then end when
// ctx does, with ctx's error), and returns an error to refuse it: Pick and
// Match fail with that error and nothing of the request is accounted. It
// runs after the request's own checks (ErrNoEndpoints, ErrEndpointsNotSet,
// ErrNoAPI, ErrModelMismatch), among the candidates serving the request's
// model (Endpoint.Models), and before anything is rendered. It must be
// safe for concurrent use. The default admits every request at once.
//
// An Admission that also has a method Abandon(ctx context.Context) is told
// when a request it admitted is not routed after all: Pick, or Match,
// failed after Admit returned nil, or the Selection of a Match was
// released without a Commit (admission.Controller then drops the claim
// its release of the request took at once). It is told once per admission.
type Admission interface {
	Admit(ctx context.Context, req *Request, endpoints []Endpoint) error
}

// abandoner is an Admission told of an admitted request that is not
// routed (see Admission).
type abandoner interface {
	Abandon(ctx context.Context)
}

// abandon tells the admission that the request of ctx, admitted, is not
// routed: its pick failed, or its Selection was released uncommitted.
func (r *Router) abandon(ctx context.Context) {
	if a, ok := r.pipe.admission.(abandoner); ok {
		a.Abandon(ctx)
	}
}

// admitAll is the default Admission.
type admitAll struct{}

// Admit admits req.
func (admitAll) Admit(context.Context, *Request, []Endpoint) error { return nil }

// admit runs the request's checks, narrows the candidates to the endpoints
// serving its model (forModel), then runs the admission over them; it
// returns the narrowed candidates.
func (r *Router) admit(ctx context.Context, req *Request, endpoints []Endpoint) ([]Endpoint, error) {
	if err := r.check(ctx, req, endpoints); err != nil {
		return nil, err
	}
	endpoints, err := r.forModel(req, endpoints)
	if err != nil {
		return nil, err
	}
	return endpoints, r.pipe.admission.Admit(ctx, req, endpoints)
}

// check rejects what cannot be routed at all: no candidates, a caller
// already gone, and the request-side mistakes of checkRequest. (A chosen
// candidate's ID is checked at Commit: see Selection.Commit.)
func (r *Router) check(ctx context.Context, req *Request, endpoints []Endpoint) error {
	if len(endpoints) == 0 {
		return ErrNoEndpoints
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.checkRequest(req)
}
