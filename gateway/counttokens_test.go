package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// POST /v1/messages/count_tokens (vLLM's Anthropic token count) reaches the
// endpoints in turn by its own path, its body unchanged and the answer
// relayed, without a routing decision or load; a slashed path loses its
// slash, another method and an oversized body are answered in Anthropic's
// shape, and every outcome is counted under api="count_tokens".
func TestGatewayPassesCountTokensToTheEndpointsInTurn(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 2, Config{MaxBodyBytes: 4096})
	defer h.close()
	paths := make(chan string, 4)
	for _, u := range h.ups {
		u.setInfer(func(w http.ResponseWriter, r *http.Request) {
			paths <- r.URL.Path
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"input_tokens":12}`)
		})
	}
	body := `{"model":"test-model","messages":[{"role":"user","content":"how many?"}]}`
	for _, path := range []string{"/v1/messages/count_tokens", "/v1/messages/count_tokens/"} {
		resp := h.post(path, body)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.JSONEq(t, `{"input_tokens":12}`, readAll(t, resp))
		require.Equal(t, "/v1/messages/count_tokens", recv(t, paths, "the engine's request"))
	}
	for _, u := range h.ups {
		b, _ := u.received()
		require.Equal(t, []string{body}, []string{string(b[0])}, "one each, the body as sent")
		require.Len(t, b, 1)
		tok, reqs, _ := h.router.Load().Load(u.id)
		require.Zero(t, tok+reqs, "no load accounted")
	}
	// Counted as the handler returns, which may be after the client read the answer.
	counted := func(r Result, n float64) {
		t.Helper()
		require.Eventually(t, func() bool { return counter(t, h.reg, "count_tokens", r) == n }, wait, time.Millisecond, r)
	}
	counted(ResultSuccess, 2)

	resp, err := h.client.Get(h.gw.URL + "/v1/messages/count_tokens")
	require.NoError(t, err)
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Contains(t, readAll(t, resp), `"type":"error"`)

	resp = h.post("/v1/messages/count_tokens", `{"model":"test-model","messages":[{"role":"user","content":"`+strings.Repeat("a", 5000)+`"}]}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Contains(t, readAll(t, resp), `"type":"error"`)
	counted(ResultBodyTooLarge, 1)
	counted(ResultBadRequest, 1) // the GET
}

// In multi-model mode a token count goes only to the endpoints serving its
// model, where the simulated engine (as vLLM) counts the Messages prompt;
// a model nobody serves is the gateway's 404 in Anthropic's shape.
func TestGatewayCountTokensFollowsItsModel(t *testing.T) {
	defer leakcheck.Check(t)()
	f, id := startMultiModelFleet(t)
	defer f.close(t)
	f.waitPolled(t)
	count := func(model string) (int, string, string) {
		t.Helper()
		resp, err := f.client.Post(f.gw.URL()+"/v1/messages/count_tokens", "application/json",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"count me please"}]}`))
		require.NoError(t, err)
		b := readAll(t, resp)
		return resp.StatusCode, resp.Header.Get(HeaderEndpoint), b
	}
	seen := map[string]bool{}
	for range 4 {
		code, ep, body := count("beta")
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `"input_tokens"`)
		seen[ep] = true
	}
	require.Equal(t, map[string]bool{id["multi"]: true, id["beta"]: true}, seen, "beta's endpoints in turn, not alpha's")
	code, _, body := count("gamma")
	require.Equal(t, http.StatusNotFound, code, body)
	require.Contains(t, body, `"type":"error"`)
}
