package gateway

import (
	"fmt"
	"net/http"

	"github.com/kvroute/kvroute/internal/apierror"
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
	body := apierror.Body(api == render.APIMessages, status, msg, param)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
