package kvroute

import (
	"context"
	"errors"
)

// Picker is the small interface a gateway uses: one call per request, which
// returns the endpoint to forward the request to. The gateway then reports the
// request's first response chunk and its end on the returned Decision.
type Picker interface {
	// Pick chooses one of endpoints for req. It fails when no endpoint can
	// be chosen (an empty candidate list or a cancelled context) and, for a
	// Router, on the mistakes that would route without cache information
	// (ErrEndpointsNotSet, ErrNoAPI, ErrModelMismatch) or a request ID
	// already in flight; a failed render is not an error: the request is
	// routed by load alone and the Decision says so.
	Pick(ctx context.Context, req *Request, endpoints []Endpoint) (*Decision, error)
}

// ErrNoEndpoints is returned by Pick when the candidate list is empty.
var ErrNoEndpoints = errors.New("kvroute: no candidate endpoints")
