package render

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// Reason classifies a render failure. The values are the reason label of
// llm_d_epp_token_producer_render_failures_total (except ReasonCanceled, which
// is never counted there).
type Reason string

const (
	// ReasonTimeout: the budget, the per-attempt cap or the caller's deadline
	// ran out.
	ReasonTimeout Reason = "timeout"
	// ReasonStatus: the renderer answered with a non-2xx status.
	ReasonStatus Reason = "status"
	// ReasonConnection: the HTTP transport failed (dial, reset, EOF, ...).
	ReasonConnection Reason = "connection"
	// ReasonDecode: a 2xx body could not be parsed, was too large, or held
	// invalid token IDs or multimodal features.
	ReasonDecode Reason = "decode"
	// ReasonNoEndpoints: no render endpoint is known.
	ReasonNoEndpoints Reason = "no_endpoints"
	// ReasonSaturated: no render slot came free within Config.MaxQueueWait
	// (every endpoint at Config.MaxConcurrency); no HTTP attempt was made.
	// kvroute's own reason: the llm-d token producer has no limit.
	ReasonSaturated Reason = "saturated"
	// ReasonOther: anything else, such as a body that is not a JSON object or
	// a legacy translation that is not possible.
	ReasonOther Reason = "other"
	// ReasonCanceled: the caller canceled the context. Not a failure of the
	// renderer, so it is not counted in the failures metric.
	ReasonCanceled Reason = "canceled"
)

// Sentinel errors carried by Error.Err; test with errors.Is.
var (
	// ErrRenderNotEnabled: the renderer answered a render route with FastAPI's
	// bare {"detail":"Not Found"} 404, so the route is not registered. vLLM
	// 0.30 registers render routes only with --enable-scale-out. Retried on
	// another endpoint; the endpoint is passed over for that route a while.
	ErrRenderNotEnabled = errors.New("render routes not enabled on the server: start vLLM with --enable-scale-out (vLLM >= 0.30; older builds: VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1) or run `vllm launch render`")
	// ErrModelNotFound: the renderer answered 404 with an ErrorResponse: it
	// does not serve the model named in the body (a model mismatch, not a
	// deployment error). Not retried.
	ErrModelNotFound = errors.New("the renderer does not serve the requested model")
	// ErrNoEndpoints: no render endpoint is configured or discovered.
	ErrNoEndpoints = errors.New("no vLLM render endpoints discovered")
	// ErrInvalidRequest: the request cannot be sent (unknown API, a body that
	// is not a JSON object).
	ErrInvalidRequest = errors.New("invalid render request")
	// ErrUntranslatable: legacy mode cannot translate the request into a chat
	// completions request without losing part of the prompt.
	ErrUntranslatable = errors.New("request cannot be translated to chat completions")
	// ErrSaturated: every render slot stayed taken for Config.MaxQueueWait,
	// so the render was given up at once rather than after the budget.
	ErrSaturated = errors.New("render endpoints saturated: no render slot free within maxQueueWait")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("render client closed")
	// ErrFixedURL: SetEndpoints was called on a Client with a fixed URL.
	ErrFixedURL = errors.New("render client uses a fixed URL; endpoints cannot be set")
)

// maxErrorBody is how much of a non-2xx body an Error keeps.
const maxErrorBody = 1 << 10

// Error is the only error type Client.Render returns.
type Error struct {
	// Reason classifies the failure; it is the failures metric's label.
	Reason Reason
	// Status is the HTTP status of the last answer, 0 when there was none.
	Status int
	// Endpoint is the endpoint ID (the URL with a fixed URL) of the last
	// attempt, "" when no attempt was made.
	Endpoint string
	// Message is the message of a vLLM ErrorResponse, when the body had one.
	Message string
	// Body is at most 1 KiB of the non-2xx response body.
	Body string
	// Attempts is the number of HTTP attempts made (0, 1 or 2).
	Attempts int
	// Err is the cause: a sentinel of this package, a context error, or the
	// transport's error; nil for a plain non-2xx answer.
	Err error
}

// Error describes the failure in one line.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("render")
	if e.Endpoint != "" {
		b.WriteString(" via ")
		b.WriteString(e.Endpoint)
	}
	b.WriteString(": ")
	switch {
	case errors.Is(e.Err, ErrRenderNotEnabled):
		b.WriteString("HTTP 404 {\"detail\":\"Not Found\"}: ")
		b.WriteString(ErrRenderNotEnabled.Error())
		return b.String()
	case errors.Is(e.Err, ErrModelNotFound):
		b.WriteString("model mismatch (HTTP 404)")
		if e.Message != "" {
			b.WriteString(": ")
			b.WriteString(e.Message)
		}
		return b.String()
	}
	b.WriteString(string(e.Reason))
	if e.Status != 0 {
		b.WriteString(": HTTP ")
		b.WriteString(strconv.Itoa(e.Status))
	}
	switch {
	case e.Message != "":
		b.WriteString(": ")
		b.WriteString(e.Message)
	case e.Body != "":
		b.WriteString(": ")
		b.WriteString(e.Body)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether the failure may succeed on another endpoint:
// transport errors, timeouts, 408, 429, 5xx, and the bare 404 of a
// renderer without render routes (ErrRenderNotEnabled).
func (e *Error) Retryable() bool {
	switch e.Reason {
	case ReasonTimeout, ReasonConnection:
		return true
	case ReasonStatus:
		return retryableStatus(e.Status) || errors.Is(e.Err, ErrRenderNotEnabled)
	}
	return false
}

func retryableStatus(status int) bool {
	return status == 408 || status == 429 || status >= 500
}

// statusError classifies a non-2xx answer from its (possibly truncated) body.
func statusError(endpoint string, status int, body []byte) *Error {
	e := &Error{Reason: ReasonStatus, Status: status, Endpoint: endpoint, Attempts: 1}
	keep := body
	if len(keep) > maxErrorBody {
		keep = keep[:maxErrorBody]
	}
	e.Body = string(keep)
	var parsed struct {
		Error  *json.RawMessage `json:"error"`
		Detail *json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &parsed) != nil {
		return e
	}
	if parsed.Error != nil {
		var er struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(*parsed.Error, &er) == nil {
			e.Message = er.Message
		}
		if status == 404 {
			e.Err = ErrModelNotFound
			return e
		}
	} else if parsed.Detail != nil && status == 404 {
		e.Err = ErrRenderNotEnabled
	}
	return e
}
