package kvroute

import "context"

// Admission is the admission step, the pipeline's first: it decides whether
// a request is routed now. Admit returns nil to admit req, may block until
// it can (a flow-control queue waiting for capacity; it must then end when
// ctx does, with ctx's error), and returns an error to refuse it: Pick and
// Match fail with that error and nothing of the request is accounted. It
// runs after the request's own checks (ErrNoEndpoints, ErrEndpointsNotSet,
// ErrNoAPI, ErrModelMismatch) and before anything is rendered. It must be
// safe for concurrent use. The default admits every request at once.
type Admission interface {
	Admit(ctx context.Context, req *Request, endpoints []Endpoint) error
}

// admitAll is the default Admission.
type admitAll struct{}

// Admit admits req.
func (admitAll) Admit(context.Context, *Request, []Endpoint) error { return nil }

// admit runs the request's checks, then the admission.
func (r *Router) admit(ctx context.Context, req *Request, endpoints []Endpoint) error {
	if err := r.check(ctx, req, endpoints); err != nil {
		return err
	}
	return r.pipe.admission.Admit(ctx, req, endpoints)
}

// check rejects what cannot be routed at all: no candidates, a caller
// already gone, and the request-side mistakes of checkRequest.
func (r *Router) check(ctx context.Context, req *Request, endpoints []Endpoint) error {
	if len(endpoints) == 0 {
		return ErrNoEndpoints
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.checkRequest(req)
}
