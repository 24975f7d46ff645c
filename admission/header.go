package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/kvroute/kvroute/internal/recent"
)

// The request headers an HTTP host reads for the admission (FromHeader),
// and the response header that names a refusal; the kvroute gateway and the
// ext_proc picker both use them.
const (
	// HeaderObjective names the request's InferenceObjective, which the
	// admission maps to a priority (the Inference Extension's header).
	HeaderObjective = "X-Gateway-Inference-Objective"
	// HeaderObjectiveLLMD is llm-d's alias of HeaderObjective, read when
	// HeaderObjective is absent.
	HeaderObjectiveLLMD = "X-Llm-D-Inference-Objective"
	// HeaderFairnessID names the request's flow: requests of one priority
	// share the queue fairly between fairness IDs (the first 256 bytes of
	// each, WithFairnessID).
	HeaderFairnessID = "X-Gateway-Inference-Fairness-Id"
	// HeaderFairnessIDLLMD is llm-d's name for the fairness ID, read when
	// HeaderFairnessID is absent: llm-d's flow control reads only this
	// one, so clients written for it send only this one.
	HeaderFairnessIDLLMD = "X-Llm-D-Inference-Fairness-Id"
	// HeaderQueueTimeout is how long the request may wait in the queue, a
	// Go duration ("500ms", "2s") in (0, MaxQueueTimeout]; it replaces the
	// objective's queue timeout.
	HeaderQueueTimeout = "X-Kvroute-Queue-Timeout"
	// HeaderAdmission names why the admission refused a request: shed,
	// queue_full, expired or closed (Reason).
	HeaderAdmission = "X-Kvroute-Admission"
)

// MaxQueueTimeout bounds HeaderQueueTimeout.
const MaxQueueTimeout = time.Hour

// FromHeader returns ctx carrying the objective, fairness ID and queue
// deadline (from now) named by the request headers h, and the request's
// admission record (Track), or an error naming the malformed header, which
// a host answers with 400.
func FromHeader(ctx context.Context, h http.Header, now time.Time) (context.Context, error) {
	ctx = Track(ctx)
	obj := h.Get(HeaderObjective)
	if obj == "" {
		obj = h.Get(HeaderObjectiveLLMD)
	}
	if obj != "" {
		ctx = WithObjective(ctx, obj)
	}
	id := h.Get(HeaderFairnessID)
	if id == "" {
		id = h.Get(HeaderFairnessIDLLMD)
	}
	if id != "" {
		ctx = WithFairnessID(ctx, id)
	}
	if v := h.Get(HeaderQueueTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > MaxQueueTimeout {
			return ctx, fmt.Errorf("header %s: %s is not a duration in (0, %v] such as \"500ms\" or \"2s\"", HeaderQueueTimeout, quoteValue(v), MaxQueueTimeout)
		}
		ctx = WithDeadline(ctx, now.Add(d))
	}
	return ctx, nil
}

// quoteValue quotes a client's header value for an error, cut to
// recent.MaxText bytes (marked with "..." after the quote) so that the
// error, which a host may log and send back, stays small however long the
// header the client sent.
func quoteValue(v string) string {
	c, cut := recent.Clip(v)
	if cut {
		return strconv.Quote(c) + "..."
	}
	return strconv.Quote(c)
}

// HTTPStatus maps a refusal to its HTTP answer: 429 (with Retry-After) for
// shed traffic and a full queue, 503 when no endpoint became free in time or
// the admission closed. ok is false for errors that are not refusals.
func HTTPStatus(err error) (status int, ok bool) {
	switch {
	case errors.Is(err, ErrShed), errors.Is(err, ErrQueueFull):
		return http.StatusTooManyRequests, true
	case errors.Is(err, ErrExpired), errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable, true
	}
	return 0, false
}

// RetryAfterValue renders a retry hint as the Retry-After header's value:
// whole seconds, rounded up, at least 1 (a hint of 0 would invite the retry
// at once). Rounding up cannot overflow: a hint within a second of the
// largest Duration gives its own count of seconds rather than wrapping.
func RetryAfterValue(d time.Duration) string {
	secs := int64(d / time.Second)
	if d%time.Second > 0 {
		secs++
	}
	return strconv.FormatInt(max(secs, 1), 10)
}
