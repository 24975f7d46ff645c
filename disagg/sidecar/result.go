package sidecar

import (
	"encoding/json"
	"time"
)

// Fallback reasons: why a request with a prefiller ran its prefill on the
// decoder instead. They are the reason label values of
// kvroute_sidecar_prefill_fallbacks_total.
const (
	// ReasonBadTarget: the header is not a valid host:port.
	ReasonBadTarget = "bad_target"
	// ReasonUnreachable: the prefiller refused or dropped the connection.
	ReasonUnreachable = "unreachable"
	// ReasonTimeout: no answer within Config.PrefillTimeout.
	ReasonTimeout = "timeout"
	// ReasonStatus: the prefiller answered a non-2xx status.
	ReasonStatus = "status"
	// ReasonBadResponse: the answer was too large, not JSON, or carried no
	// usable kv_transfer_params.
	ReasonBadResponse = "bad_response"
	// ReasonNotAllowed: Options.AllowTarget refused the address (the
	// server-side request forgery guard llm-d's sidecar has as an
	// allowlist of the pool's pods).
	ReasonNotAllowed = "not_allowed"
	// ReasonForcedTool: a Messages request forcing a named tool
	// (tool_choice {"type":"tool"}), not sent to the prefiller: vLLM
	// decodes the generated text as the tool call's JSON input, which one
	// token is not, and fails the prefill (forcesNamedTool).
	ReasonForcedTool = "forced_tool"
	// ReasonBodyBudget: a Handler's budget of Config.MaxBodyBytesInFlight
	// (or the one Exchange.PrefillWithin is given) had room for the body
	// but not for the copies a split makes of it, so the decoder gets the
	// body alone (see Handler).
	ReasonBodyBudget = "body_budget"
	// ReasonBodyTooLarge: the body was over Config.MaxBodyBytes, a bound
	// on what goes to a prefiller that Exchange.PrefillWithin's caller set
	// below its own body limit, so the decoder gets it alone.
	ReasonBodyTooLarge = "body_too_large"
)

// Reasons lists every fallback reason, the label values' fixed set.
var Reasons = []string{ReasonBadTarget, ReasonUnreachable, ReasonTimeout, ReasonStatus, ReasonBadResponse, ReasonNotAllowed, ReasonForcedTool, ReasonBodyBudget, ReasonBodyTooLarge}

// Result is the outcome of Exchange.Prefill.
type Result struct {
	// DecodeBody is what to send to the decoder: the client body with the
	// prefiller's kv_transfer_params when Split, else the client body
	// without any kv_transfer_params of its own (the decoder prefills
	// locally: a client's do_remote_prefill would otherwise have it pull
	// KV blocks from whatever address the client named).
	DecodeBody []byte
	// LocalBody is the client body without any kv_transfer_params of its
	// own: DecodeBody on a fallback, and what a retry that has the decoder
	// prefill locally must send (the client body itself when it has none).
	LocalBody []byte
	// Split reports that the prefiller computed the prompt and the decoder
	// will pull its KV blocks.
	Split bool
	// Fallback is the reason (one of Reasons) the prefill step was given
	// up, "" when Split.
	Fallback string
	// Params is the prefiller's kv_transfer_params (nil unless Split).
	Params json.RawMessage
	// RequestID is the X-Request-Id both halves carry: the client's, or a
	// fresh one. Send it on the decode request.
	RequestID string
	// PrefillDuration is how long the prefill step took.
	PrefillDuration time.Duration
	// clientParams reports that the client body carried kv_transfer_params
	// of its own, which neither DecodeBody nor LocalBody carries.
	clientParams bool
}
