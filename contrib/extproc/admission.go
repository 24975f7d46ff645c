package extproc

import (
	"errors"
	"net/http"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/kvroute/kvroute/admission"
)

// The request headers the admission reads (as Envoy sends them, lower case),
// and the response header that names an admission refusal. They are the
// kvroute gateway's.
const (
	// HeaderObjective names the request's InferenceObjective, which the
	// admission maps to a priority (the Inference Extension's header).
	HeaderObjective = "x-gateway-inference-objective"
	// HeaderObjectiveLLMD is llm-d's alias of HeaderObjective, read when
	// HeaderObjective is absent.
	HeaderObjectiveLLMD = "x-llm-d-inference-objective"
	// HeaderFairnessID names the request's flow: requests of one priority
	// share the queue fairly between fairness IDs.
	HeaderFairnessID = "x-gateway-inference-fairness-id"
	// HeaderFairnessIDLLMD is llm-d's name for the fairness ID, read when
	// HeaderFairnessID is absent.
	HeaderFairnessIDLLMD = "x-llm-d-inference-fairness-id"
	// HeaderQueueTimeout is how long the request may wait in the admission
	// queue, a Go duration ("500ms", "2s") in (0, 1h]; it replaces the
	// objective's queue timeout. A malformed value is answered 400.
	HeaderQueueTimeout = "x-kvroute-queue-timeout"
	// HeaderAdmission names why the admission refused a request: shed,
	// queue_full, expired or closed.
	HeaderAdmission = "x-kvroute-admission"
	// HeaderDroppedReason is llm-d's picker's response header naming why it
	// dropped a request, in llm-d's words, so that what reads it behind
	// llm-d's picker reads it behind kvroute's: rejected-saturated (shed
	// or queue full), rejected-ttl-expired, rejected-shutting-down, and
	// rejected-no-endpoints on every 503 for want of an endpoint.
	HeaderDroppedReason = "x-llm-d-request-dropped-reason"
)

// The values of HeaderDroppedReason, llm-d's.
const (
	droppedSaturated    = "rejected-saturated"
	droppedTTLExpired   = "rejected-ttl-expired"
	droppedShuttingDown = "rejected-shutting-down"
	droppedNoEndpoints  = "rejected-no-endpoints"
)

// admissionHeaders are the refusal's headers: the reason, kvroute's and
// llm-d's, and Retry-After in whole seconds (at least 1).
func admissionHeaders(err error, retry time.Duration) []*corev3.HeaderValueOption {
	h := []*corev3.HeaderValueOption{
		header(HeaderAdmission, admission.Reason(err)),
		header("retry-after", admission.RetryAfterValue(retry)),
	}
	if r := droppedReason(err); r != "" {
		h = append(h, header(HeaderDroppedReason, r))
	}
	return h
}

// droppedReason is HeaderDroppedReason's value for an admission refusal, ""
// for another error.
func droppedReason(err error) string {
	switch {
	case errors.Is(err, admission.ErrShed), errors.Is(err, admission.ErrQueueFull):
		return droppedSaturated
	case errors.Is(err, admission.ErrExpired):
		return droppedTTLExpired
	case errors.Is(err, admission.ErrClosed):
		return droppedShuttingDown
	}
	return ""
}

// noEndpoint answers a request for which no endpoint is available: 503, with
// llm-d's drop reason.
func (st *streamState) noEndpoint(msg string) error {
	st.setResult(resultNoEndpoint)
	return st.immediate(http.StatusServiceUnavailable, msg, header(HeaderDroppedReason, droppedNoEndpoints))
}

// notify tells the admission, if any, that endpoint's accounting moved (a
// pick committed, a first chunk came, a request ended), so that the queue
// is served at once.
func (s *Server) notify(endpoint string) {
	if s.admission != nil && endpoint != "" {
		s.admission.Notify(endpoint)
	}
}
