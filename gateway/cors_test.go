package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// With CORSAllowedOrigins, the answers the gateway writes itself carry the
// CORS headers the engines' policy would (the origin echoed with Vary, or
// "*"; credentials when allowed), for listed origins only; an engine's
// response keeps exactly the engine's CORS headers, none when the engine
// sent none; without the key nothing changes.
func TestGatewayOwnAnswersCarryTheEnginesCORSPolicy(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, c := range []struct {
		name        string
		origins     []string
		credentials bool
		origin      string
		allow, cred string
	}{
		{"listed origin", []string{"https://app.example"}, false, "https://app.example", "https://app.example", ""},
		{"other origin", []string{"https://app.example"}, false, "https://evil.example", "", ""},
		{"any origin", []string{"*"}, false, "https://evil.example", "*", ""},
		{"any origin with credentials", []string{"*"}, true, "https://x.example", "https://x.example", "true"},
		{"off", nil, false, "https://app.example", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, 1, Config{MaxBodyBytes: 1024, CORSAllowedOrigins: c.origins, CORSAllowCredentials: c.credentials})
			defer h.close()
			h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/models" {
					w.Header().Set("Access-Control-Allow-Origin", "https://engine.example")
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"choices":[],"data":[]}`)
			})
			do := func(method, path, body string) *http.Response {
				t.Helper()
				req, err := http.NewRequest(method, h.gw.URL+path, strings.NewReader(body))
				require.NoError(t, err)
				req.Header.Set("Origin", c.origin)
				req.Header.Set("Content-Type", "application/json")
				resp, err := h.client.Do(req)
				require.NoError(t, err)
				readAll(t, resp)
				return resp
			}
			// The gateway's own answers: 413, 404, 405.
			for _, resp := range []*http.Response{
				do(http.MethodPost, "/v1/completions", completionsBody(strings.Repeat("a ", 1000), false)),
				do(http.MethodGet, "/nowhere", ""),
				do(http.MethodGet, "/v1/completions", ""),
			} {
				require.GreaterOrEqual(t, resp.StatusCode, 400)
				require.Equal(t, c.allow, resp.Header.Get("Access-Control-Allow-Origin"), resp.Status)
				require.Equal(t, c.cred, resp.Header.Get("Access-Control-Allow-Credentials"), resp.Status)
				if c.allow != "" && c.allow != "*" {
					require.Equal(t, "Origin", resp.Header.Get("Vary"))
				}
			}
			// The engine's answers: its headers only.
			resp := do(http.MethodPost, "/v1/completions", completionsBody("hi", false))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "the engine sent none")
			require.Empty(t, resp.Header.Get("Vary"))
			resp = do(http.MethodGet, "/v1/models", "")
			require.Equal(t, "https://engine.example", resp.Header.Get("Access-Control-Allow-Origin"))
		})
	}
}

// A malformed origin, or credentials without origins, is a configuration
// error.
func TestNewRejectsBadCORSConfig(t *testing.T) {
	for _, cfg := range []Config{
		{CORSAllowedOrigins: []string{"app.example"}},
		{CORSAllowedOrigins: []string{"https://app.example/"}},
		{CORSAllowedOrigins: []string{""}},
		{CORSAllowCredentials: true},
	} {
		_, err := New(cfg, new(RoundRobin), Options{})
		require.Error(t, err, "%+v", cfg)
	}
	h, err := New(Config{CORSAllowedOrigins: []string{"*", "http://localhost:3000"}}, new(RoundRobin), Options{})
	require.NoError(t, err)
	h.Close()
}
