package gateway

import (
	"net/http"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/render"
)

// The request headers the admission reads, and the response header that
// names an admission refusal (package admission's, see admission.FromHeader).
const (
	// HeaderObjective names the request's InferenceObjective.
	HeaderObjective = admission.HeaderObjective
	// HeaderObjectiveLLMD is llm-d's alias of HeaderObjective.
	HeaderObjectiveLLMD = admission.HeaderObjectiveLLMD
	// HeaderFairnessID names the request's flow.
	HeaderFairnessID = admission.HeaderFairnessID
	// HeaderFairnessIDLLMD is llm-d's name for HeaderFairnessID.
	HeaderFairnessIDLLMD = admission.HeaderFairnessIDLLMD
	// HeaderQueueTimeout is how long the request may wait in the admission
	// queue; a malformed value is answered 400.
	HeaderQueueTimeout = admission.HeaderQueueTimeout
	// HeaderAdmission names why the admission refused a request.
	HeaderAdmission = admission.HeaderAdmission
)

// notify tells the admission that d's endpoint's accounting moved.
func (h *Handler) notify(d *kvroute.Decision) {
	if h.admission != nil {
		h.admission.Notify(d.Endpoint.ID)
	}
}

// refuse answers an admission refusal (of Admit or of the dispatch gate):
// 429 with Retry-After for shed and queue_full, 503 for expired and closed,
// HeaderAdmission naming the reason, Retry-After the admission's
// RetryAfter (admission.DefaultRetryAfter when the Handler was given no
// admission: its picker's own refused). It reports false, writing nothing,
// when err is not the admission's.
func (h *Handler) refuse(w http.ResponseWriter, api render.API, am *apiMetrics, err error) bool {
	status, ok := admission.HTTPStatus(err)
	if !ok {
		return false
	}
	res := ResultNoEndpoint
	if status == http.StatusTooManyRequests {
		res = ResultShed
	}
	am.results[res].Inc()
	// A Handler made with New has no admission of its own even when its
	// Router admits (kvroute.Options.Admission): its refusals take the
	// default hint.
	hint := admission.DefaultRetryAfter
	if h.admission != nil {
		hint = h.admission.Config().RetryAfter
	}
	w.Header().Set(HeaderAdmission, admission.Reason(err))
	w.Header().Set("Retry-After", admission.RetryAfterValue(hint))
	writeError(w, api, status, err.Error())
	return true
}
