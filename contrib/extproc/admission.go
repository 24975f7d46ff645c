package extproc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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
	// HeaderQueueTimeout is how long the request may wait in the admission
	// queue, a Go duration ("500ms", "2s") in (0, 1h]; it replaces the
	// objective's queue timeout. A malformed value is answered 400.
	HeaderQueueTimeout = "x-kvroute-queue-timeout"
	// HeaderAdmission names why the admission refused a request: shed,
	// queue_full, expired or closed.
	HeaderAdmission = "x-kvroute-admission"
)

// maxQueueTimeout bounds HeaderQueueTimeout.
const maxQueueTimeout = time.Hour

// admissionContext returns ctx carrying the request's objective, fairness ID
// and queue deadline from its headers, or an error naming the malformed
// header.
func admissionContext(ctx context.Context, h http.Header, now time.Time) (context.Context, error) {
	obj := h.Get(HeaderObjective)
	if obj == "" {
		obj = h.Get(HeaderObjectiveLLMD)
	}
	if obj != "" {
		ctx = admission.WithObjective(ctx, obj)
	}
	if id := h.Get(HeaderFairnessID); id != "" {
		ctx = admission.WithFairnessID(ctx, id)
	}
	if v := h.Get(HeaderQueueTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxQueueTimeout {
			return ctx, fmt.Errorf("header %s: %q is not a duration in (0, %v] such as \"500ms\" or \"2s\"", HeaderQueueTimeout, v, maxQueueTimeout)
		}
		ctx = admission.WithDeadline(ctx, now.Add(d))
	}
	return ctx, nil
}

// admissionStatus maps an admission refusal to its HTTP answer: 429 for
// shed traffic and a full queue, 503 when no endpoint became free in time
// or the admission closed. ok is false for other errors.
func admissionStatus(err error) (status int, ok bool) {
	switch {
	case errors.Is(err, admission.ErrShed), errors.Is(err, admission.ErrQueueFull):
		return http.StatusTooManyRequests, true
	case errors.Is(err, admission.ErrExpired), errors.Is(err, admission.ErrClosed):
		return http.StatusServiceUnavailable, true
	}
	return 0, false
}

// admissionHeaders are the refusal's headers: the reason, and Retry-After
// in whole seconds (at least 1).
func admissionHeaders(err error, retry time.Duration) []*corev3.HeaderValueOption {
	secs := max(int64((retry+time.Second-1)/time.Second), 1)
	return []*corev3.HeaderValueOption{
		header(HeaderAdmission, admission.Reason(err)),
		header("retry-after", strconv.FormatInt(secs, 10)),
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
