package gateway

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// upstreamErrorMessage is the message of the gateway's error body, in
// either shape (OpenAI's or Anthropic's: both nest it under "error").
func upstreamErrorMessage(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	return e.Error.Message
}

// A request to an engine whose port is closed gets a 502 naming the kind of
// failure, and neither the engine's address nor the operating system's
// error; the endpoint's ID comes in its header, as on a proxied response.
func TestGatewayHidesTheUnreachableEnginesAddress(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	h.ups[0].Close()
	_, port, err := net.SplitHostPort(h.eps[0].ID)
	require.NoError(t, err)

	for _, c := range []struct{ api, path, body string }{
		{"completions", "/v1/completions", completionsBody("hi", false)},
		{"messages", "/v1/messages", `{"model":"test-model","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		resp := h.post(c.path, c.body)
		got := readAll(t, resp)
		require.Equal(t, http.StatusBadGateway, resp.StatusCode, got)
		require.Equal(t, "the endpoint could not be reached", upstreamErrorMessage(t, got))
		require.NotContains(t, got, port, "the engine's port")
		require.NotContains(t, got, "127.0.0.1")
		require.NotContains(t, got, "refused")
		require.Equal(t, h.eps[0].ID, resp.Header.Get(HeaderEndpoint))
		require.Eventually(t, func() bool { return counter(t, h.reg, c.api, ResultUpstreamUnreachable) == 1 }, wait, time.Millisecond, c.api)
	}

	// GET /v1/models, forwarded without a routing decision, alike.
	resp, err := h.client.Get(h.gw.URL + "/v1/models")
	require.NoError(t, err)
	got := readAll(t, resp)
	require.Equal(t, http.StatusBadGateway, resp.StatusCode, got)
	require.Equal(t, "the endpoint could not be reached", upstreamErrorMessage(t, got))
	require.NotContains(t, got, port)
}

// An engine that closes the connection without an answer, and one that
// answers something that is no HTTP response, are told apart from an
// unreachable one: each its fixed text and its result.
func TestGatewayClassifiesEngineFailures(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	_, port, err := net.SplitHostPort(h.eps[0].ID)
	require.NoError(t, err)
	hijack := func(answer string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, answer)
			_ = c.Close()
		}
	}
	for i, c := range []struct {
		answer, text string
		result       Result
	}{
		{"", "the endpoint closed the connection before answering", ResultUpstreamClosed},
		{"HTTP/1.1 abc nonsense\r\n\r\n", "the endpoint failed to answer", ResultUpstreamError},
	} {
		h.ups[0].setInfer(hijack(c.answer))
		resp := h.post("/v1/completions", completionsBody("hello", false))
		got := readAll(t, resp)
		require.Equal(t, http.StatusBadGateway, resp.StatusCode, got)
		require.Equal(t, c.text, upstreamErrorMessage(t, got), i)
		require.NotContains(t, got, port)
		require.Eventually(t, func() bool { return counter(t, h.reg, "completions", c.result) == 1 }, wait, time.Millisecond, c.result)
	}
	require.Zero(t, counter(t, h.reg, "completions", ResultUpstreamUnreachable))
}
