package extproc

import (
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
)

// admissionHeaders are the refusal's headers: the reason, and Retry-After
// in whole seconds (at least 1).
func admissionHeaders(err error, retry time.Duration) []*corev3.HeaderValueOption {
	return []*corev3.HeaderValueOption{
		header(HeaderAdmission, admission.Reason(err)),
		header("retry-after", admission.RetryAfterValue(retry)),
	}
}

// notify tells the admission, if any, that endpoint's accounting moved (a
// pick committed, a first chunk came, a request ended), so that the queue
// is served at once.
func (s *Server) notify(endpoint string) {
	if s.admission != nil && endpoint != "" {
		s.admission.Notify(endpoint)
	}
}
