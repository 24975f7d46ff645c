package gateway

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A browser's CORS preflight, which the gateway forwards to an engine, is
// counted under api "preflight" by its result, as every other route's
// requests are: a preflight the engines fail (502) or the gateway cannot
// route (503) leaves the browser client unable to send its request, and
// was in none of the gateway's metrics.
func TestGatewayCountsCORSPreflights(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		io.WriteString(w, "OK")
	})
	preflight := func(path string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodOptions, h.gw.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := h.client.Do(req)
		require.NoError(t, err)
		readAll(t, resp)
		return resp.StatusCode
	}
	for i, path := range []string{"/v1/chat/completions", "/v1/models", countTokensPath} {
		require.Equal(t, http.StatusOK, preflight(path), path)
		awaitCounted(t, h.reg, "preflight", ResultSuccess, float64(i+1))
	}
	require.Zero(t, counter(t, h.reg, "models", ResultSuccess), "a preflight is no model listing")
	require.Zero(t, counter(t, h.reg, "chat_completions", ResultSuccess), "a preflight is no inference request")
	paths := []string{"/v1/messages", "/v1/completions"}
	requireFailuresCounted(t, h, "preflight", func() int {
		p := paths[0]
		paths = paths[1:]
		return preflight(p)
	})
}
