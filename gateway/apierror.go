package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/kvroute/kvroute/render"
)

// writeError writes an error in the shape of api: Anthropic's for Messages,
// OpenAI's (as vLLM sends it, param null) otherwise.
func writeError(w http.ResponseWriter, api render.API, status int, msg string) {
	writeParamError(w, api, status, msg, "")
}

// writeParamError is writeError naming param, the request's offending
// member, in OpenAI's shape ("" is null); Anthropic's has no param.
func writeParamError(w http.ResponseWriter, api render.API, status int, msg, param string) {
	var v any
	if api == render.APIMessages {
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
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

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
