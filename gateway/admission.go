package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
)

// The request headers the admission reads, and the response header that
// names an admission refusal.
const (
	// HeaderObjective names the request's InferenceObjective, which the
	// admission maps to a priority (the Inference Extension's header).
	HeaderObjective = "X-Gateway-Inference-Objective"
	// HeaderObjectiveLLMD is llm-d's alias of HeaderObjective, read when
	// HeaderObjective is absent.
	HeaderObjectiveLLMD = "X-Llm-D-Inference-Objective"
	// HeaderFairnessID names the request's flow: requests of one priority
	// share the queue fairly between fairness IDs.
	HeaderFairnessID = "X-Gateway-Inference-Fairness-Id"
	// HeaderQueueTimeout is how long the request may wait in the admission
	// queue, a Go duration ("500ms", "2s") in (0, 1h]; it replaces the
	// objective's queue timeout. A malformed value is answered 400.
	HeaderQueueTimeout = "X-Kvroute-Queue-Timeout"
	// HeaderAdmission names why the admission refused a request: shed,
	// queue_full, expired or closed.
	HeaderAdmission = "X-Kvroute-Admission"
)

// maxQueueTimeout bounds HeaderQueueTimeout.
const maxQueueTimeout = time.Hour

// admissionContext returns ctx carrying the request's objective, fairness ID
// and queue deadline from its headers, or an error naming the malformed
// header.
func admissionContext(ctx context.Context, r *http.Request, now time.Time) (context.Context, error) {
	obj := r.Header.Get(HeaderObjective)
	if obj == "" {
		obj = r.Header.Get(HeaderObjectiveLLMD)
	}
	if obj != "" {
		ctx = admission.WithObjective(ctx, obj)
	}
	if id := r.Header.Get(HeaderFairnessID); id != "" {
		ctx = admission.WithFairnessID(ctx, id)
	}
	if v := r.Header.Get(HeaderQueueTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxQueueTimeout {
			return ctx, fmt.Errorf("header %s: %q is not a duration in (0, %v] such as \"500ms\" or \"2s\"", HeaderQueueTimeout, v, maxQueueTimeout)
		}
		ctx = admission.WithDeadline(ctx, now.Add(d))
	}
	return ctx, nil
}

// admissionStatus maps an admission refusal to its HTTP answer: 429 with
// Retry-After for shed traffic and a full queue, 503 when no endpoint
// became free in time or the admission closed. ok is false for other
// errors.
func admissionStatus(err error) (status int, ok bool) {
	switch {
	case errors.Is(err, admission.ErrShed), errors.Is(err, admission.ErrQueueFull):
		return http.StatusTooManyRequests, true
	case errors.Is(err, admission.ErrExpired), errors.Is(err, admission.ErrClosed):
		return http.StatusServiceUnavailable, true
	}
	return 0, false
}

// retryAfter renders d as Retry-After seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(max(int64((d+time.Second-1)/time.Second), 1), 10)
}

// notify tells the admission that d's endpoint's accounting moved.
func (h *Handler) notify(d *kvroute.Decision) {
	if h.admission != nil {
		h.admission.Notify(d.Endpoint.ID)
	}
}
