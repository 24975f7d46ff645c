package apierror

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// Body is the JSON error body of status with message msg: Anthropic's shape
// when anthropic (a Messages request), otherwise vLLM's OpenAI shape
// naming param, the request's offending member ("" is null). It ends with
// a newline.
func Body(anthropic bool, status int, msg, param string) []byte {
	var v any
	if anthropic {
		v = map[string]any{"type": "error", "error": map[string]any{"type": anthropicType(status), "message": msg}}
	} else {
		var p any
		if param != "" {
			p = param
		}
		v = map[string]any{"error": map[string]any{"message": msg, "type": openAIType(status), "param": p, "code": status}}
	}
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(v) // maps of strings and ints always encode
	return buf.Bytes()
}

// openAIType is the error type vLLM's OpenAI server names for status.
func openAIType(status int) string {
	switch status {
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusMethodNotAllowed, http.StatusConflict,
		http.StatusRequestTimeout:
		return "BadRequestError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	case http.StatusTooManyRequests:
		return "RateLimitError"
	default:
		return "InternalServerError"
	}
}

// anthropicType is the error type Anthropic's API names for status.
func anthropicType(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusConflict, http.StatusRequestTimeout:
		return "invalid_request_error"
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	default:
		return "api_error"
	}
}
