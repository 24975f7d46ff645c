package extproc

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// newEnvoy starts an Envoy-behaving proxy in front of the harness' picker;
// the returned function stops it (before the leak check).
func newEnvoy(h *harness) (*httptest.Server, *http.Client, func()) {
	upstream := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	srv := httptest.NewServer(envoysim.New(envoysim.Config{ChunkBytes: 512}, h.client, upstream))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	return srv, client, func() {
		client.CloseIdleConnections()
		srv.Close()
		upstream.CloseIdleConnections()
	}
}

// End to end through the Envoy-behaving proxy: requests sharing a long
// prefix follow the engine whose KV events announced it, every request is
// answered by the engine the picker named, and no load is left behind.
func TestEndToEndSharedPrefixStaysOnItsEngine(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{}, engineOpts{})
	defer h.close()
	envoy, client, stop := newEnvoy(h)
	defer stop()

	first := ""
	for i := range 6 {
		resp := postThrough(t, client, envoy.URL, completionsBody(prompt(7, 300, "q"+string(rune('a'+i))), false))
		body := readAll(t, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.Contains(t, body, `"choices"`)
		ep := resp.Header.Get(EndpointHeader)
		require.NotEmpty(t, ep)
		if i == 0 {
			first = ep
			// Wait until the engine's KV events put the prefix in the index,
			// so that the next picks follow the events, not only the
			// speculative entry.
			require.Eventually(t, func() bool { return h.router.Index().Stats().Memberships > 0 }, wait, 5*time.Millisecond)
			continue
		}
		require.Equal(t, first, ep, "request %d left the warm engine", i)
	}
	h.idle()
	require.Equal(t, 6.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "routed"}))
}

// A streamed (SSE) completion streams through the picker chunk by chunk.
func TestEndToEndStreamingResponse(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	envoy, client, stop := newEnvoy(h)
	defer stop()
	resp := postThrough(t, client, envoy.URL, completionsBody(prompt(8, 50, "stream"), true))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	body := readAll(t, resp.Body)
	require.Contains(t, body, "data: [DONE]")
	require.GreaterOrEqual(t, strings.Count(body, "data: "), 3, "several events arrived")
	h.idle()
}

// The client goes away in the middle of a streamed response: the proxy resets
// the ext_proc stream and the picker releases the load exactly once.
func TestEndToEndClientAbortMidStream(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	envoy, client, stop := newEnvoy(h)
	defer stop()
	ctx, cancel := context.WithCancel(ctxT(t))
	body := strings.Replace(completionsBody(prompt(9, 50, "abort"), true), `"max_tokens":4`, `"max_tokens":1000`, 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, envoy.URL+"/v1/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, readAll(t, resp.Body))
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: "), line)
	_, reqs := h.load(h.engines[0].id)
	require.EqualValues(t, 1, reqs)
	cancel()
	resp.Body.Close()
	h.idle()
	require.Eventually(t, func() bool { return h.counter("kvroute_extproc_aborted_total", nil) == 1 }, wait, 5*time.Millisecond)
}

func TestEndToEndBodyTooLarge(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{MaxBodyBytes: 1024}, engineOpts{})
	defer h.close()
	envoy, client, stop := newEnvoy(h)
	defer stop()
	resp := postThrough(t, client, envoy.URL, completionsBody(prompt(10, 400, "big"), false))
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Contains(t, body, "1024 bytes")
	h.idle()
}

// Through the Envoy-behaving proxy, a completions request to
// "/v1/completions/" is answered by the engine at the API's own path.
func TestEndToEndTrailingSlashPathIsAnsweredByTheEngine(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	envoy, client, stop := newEnvoy(h)
	defer stop()
	resp, err := client.Post(envoy.URL+"/v1/completions/", "application/json", strings.NewReader(completionsBody(prompt(41, 20, "slash"), false)))
	require.NoError(t, err)
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"choices"`)
	h.idle()
}
