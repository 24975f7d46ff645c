package sidecar

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/jsonscan"
)

// generatePath is vLLM's token-in generation route, whose GenerateRequest
// reads kv_transfer_params as the routes SplitPath accepts do.
const generatePath = "/inference/v1/generate"

// readsTransferParams reports whether vLLM reads kv_transfer_params from
// the body of a POST to path: the routes SplitPath accepts and
// generatePath. A body there that is not one JSON object cannot have its
// member removed and is answered 400, as a split request's is.
func readsTransferParams(method, path string) bool {
	return method == http.MethodPost && (SplitPath(path) || path == generatePath)
}

// newTransferRemoved builds kvroute_sidecar_client_transfer_params_removed_total
// and registers it on reg (nil registers nothing).
func newTransferRemoved(reg prometheus.Registerer) (prometheus.Counter, error) {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_sidecar_client_transfer_params_removed_total",
		Help: "Requests whose body carried the client's own kv_transfer_params, removed before the decoder (or a prefiller) saw them: on a split request replaced by the exchange's, on any other removed (allowClientKVTransferParams keeps them on requests not split).",
	})
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil, errors.New("sidecar: metrics already registered on this registerer (one Handler per registry)")
		}
		return nil, err
	}
	return c, nil
}

// plainBody returns the body the decoder gets for a request r the Handler
// does not split, body as it came: without the client's own top-level
// kv_transfer_params (unless Config.AllowClientKVTransferParams), read as
// vLLM reads it (jsonText), and counted. A body without the member, or
// one that is not a JSON object on a route where vLLM reads none, is
// returned as it came. The copy that drops the member (its parsed members
// while it is built) is charged to the budget first; held is what the
// returned body holds of it, which the caller releases once the response
// has ended. Errors: bytebudget.ErrNoRoom when a copy finds no room, one
// wrapping ErrBadRequest for a body on a route readsTransferParams names
// that is not one JSON object.
func (h *Handler) plainBody(r *http.Request, body []byte) (out []byte, held int64, err error) {
	if h.x.cfg.AllowClientKVTransferParams || len(body) == 0 {
		return body, 0, nil
	}
	strict := readsTransferParams(r.Method, r.URL.Path)
	text, theld, err := h.jsonText(body)
	defer func() { h.budget.Release(theld) }()
	switch {
	case errors.Is(err, bytebudget.ErrNoRoom):
		return nil, 0, err
	case err != nil: // not text in the encoding it has: vLLM reads nothing of it either
		return body, 0, nil
	}
	var v [1][]byte
	if err := jsonscan.Members(text, transferParamsMember, v[:]); err != nil {
		if strict {
			return nil, 0, fmt.Errorf("%w: the request body is not a JSON object: %v", ErrBadRequest, err)
		}
		return body, 0, nil
	}
	if v[0] == nil {
		return body, 0, nil
	}
	c := &copies{budget: &h.budget}
	defer c.releaseAll()
	// The members' raw values are copies of theirs in text, together never
	// longer than it.
	if err := c.take(copyMembers, len(text)); err != nil {
		return nil, 0, err
	}
	parsed, err := parseObject(text)
	if err != nil {
		return nil, 0, err
	}
	if out, err = localBody(parsed, text, c.reserve(copyLocal)); err != nil {
		return nil, 0, err
	}
	held, c.held[copyLocal] = c.held[copyLocal], 0 // the caller's to release now
	h.removed.Inc()
	return out, held, nil
}
