package gateway

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

func testServerConfig(eps ...kvroute.Endpoint) ServerConfig {
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	return ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps}
}

func TestServerServesHealthMetricsAndRoutes(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	srv, err := NewServer(t.Context(), testServerConfig(kvroute.Endpoint{ID: u.id}), Options{})
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL() + "/health")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"status":"ok","endpoints":1}`, readAll(t, resp))

	resp, err = client.Post(srv.URL()+"/v1/completions", "application/json", strings.NewReader(completionsBody("hello there", false)))
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, u.id, resp.Header.Get(HeaderEndpoint))

	var metrics string
	require.Eventually(t, func() bool { // the result is counted as the handler returns
		resp, err := client.Get(srv.URL() + "/metrics")
		require.NoError(t, err)
		metrics = readAll(t, resp)
		return strings.Contains(metrics, `kvroute_gateway_requests_total{api="completions",result="success"} 1`)
	}, wait, 5*time.Millisecond)
	for _, name := range []string{
		`kvroute_gateway_requests_total{api="completions",result="success"} 1`,
		`llm_d_epp_prefix_prompt_tokens_count{endpoint_role="decode"} 1`,
		`llm_d_epp_token_producer_render_duration_seconds_count{result="success"} 1`,
		"go_goroutines",
	} {
		require.Contains(t, metrics, name)
	}

	require.NoError(t, srv.SetEndpoints(nil))
	resp, err = client.Get(srv.URL() + "/health")
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	require.NoError(t, srv.Shutdown(context.Background()))
	require.NoError(t, srv.Shutdown(context.Background()), "Shutdown is idempotent")
}

func TestServerShutdownCutsStreamsAfterItsDeadlineAndReleasesLoad(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	u.setInfer(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // an endless generation
	})
	srv, err := NewServer(t.Context(), testServerConfig(kvroute.Endpoint{ID: u.id}), Options{})
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Post(srv.URL()+"/v1/completions", "application/json", strings.NewReader(completionsBody("hi", true)))
	require.NoError(t, err)
	defer resp.Body.Close()
	_, err = bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	_, n, _ := srv.Router().Load().Load(u.id)
	require.Equal(t, int64(1), n)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = srv.Shutdown(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	tok, n, _ := srv.Router().Load().Load(u.id)
	require.Zero(t, tok)
	require.Zero(t, n, "Shutdown returns after every cut request is Done")
}

func TestServerWithRoundRobinPolicyAlternates(t *testing.T) {
	defer leakcheck.Check(t)()
	a, b := newUpstream(t), newUpstream(t)
	defer a.Close()
	defer b.Close()
	cfg := testServerConfig(kvroute.Endpoint{ID: a.id}, kvroute.Endpoint{ID: b.id})
	cfg.Policy = PolicyRoundRobin
	srv, err := NewServer(t.Context(), cfg, Options{})
	require.NoError(t, err)
	defer srv.Shutdown(context.Background())
	require.Nil(t, srv.Router())
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var got []string
	for range 4 {
		resp, err := client.Post(srv.URL()+"/v1/completions", "application/json", strings.NewReader(completionsBody("same prompt", false)))
		require.NoError(t, err)
		readAll(t, resp)
		got = append(got, resp.Header.Get(HeaderEndpoint))
	}
	require.Equal(t, []string{a.id, b.id, a.id, b.id}, got)
}

func TestNewServerRejectsAnUnknownPolicy(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := testServerConfig()
	cfg.Policy = "random"
	_, err := NewServer(t.Context(), cfg, Options{})
	require.ErrorContains(t, err, "unknown policy")
}

// A known path asked with a method it does not serve is answered 405 with
// an Allow header, as vLLM's router answers POST /v1/models (405, Allow:
// GET), not 404 as an unknown path: the model listing, the health and
// readiness probes, the metrics and the status page, each counted in
// kvroute_gateway_method_not_allowed_total by its path. The inference
// routes answer 405 as before, counted by API.
func TestServerAnswersAKnownPathWithTheWrongMethod405(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	srv, err := NewServer(t.Context(), testServerConfig(kvroute.Endpoint{ID: u.id}), Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Shutdown(context.Background())) }()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	do := func(method, path string) *http.Response {
		req, err := http.NewRequest(method, srv.URL()+path, strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		return resp
	}
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodPost, "/v1/models", "GET, HEAD"},
		{http.MethodDelete, "/v1/models/", "GET, HEAD"},
		{http.MethodPost, "/health", "GET, HEAD"},
		{http.MethodPut, "/ready", "GET, HEAD"},
		{http.MethodPost, "/metrics", "GET, HEAD"},
		{http.MethodPost, StatusPath, "GET, HEAD"},
		{http.MethodGet, "/v1/completions", "POST"},
		{http.MethodGet, countTokensPath, "POST"},
	} {
		resp := do(c.method, c.path)
		body := readAll(t, resp)
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s: %s", c.method, c.path, body)
		require.Equal(t, c.allow, resp.Header.Get("Allow"), "%s %s", c.method, c.path)
		require.Contains(t, body, `"error"`, "%s %s", c.method, c.path)
	}
	bodies, _ := u.received()
	require.Empty(t, bodies, "none reached the engine")
	resp := do(http.MethodPost, "/v1/unknown")
	readAll(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "an unknown path is still 404")

	resp = do(http.MethodGet, "/metrics")
	metrics := readAll(t, resp)
	for _, line := range []string{
		`kvroute_gateway_method_not_allowed_total{path="/v1/models"} 2`,
		`kvroute_gateway_method_not_allowed_total{path="/health"} 1`,
		`kvroute_gateway_method_not_allowed_total{path="/ready"} 1`,
		`kvroute_gateway_method_not_allowed_total{path="/metrics"} 1`,
		`kvroute_gateway_method_not_allowed_total{path="` + StatusPath + `"} 1`,
		`kvroute_gateway_unrouted_requests_total 1`,
	} {
		require.Contains(t, metrics, line)
	}
}
