package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/simengine/server"
)

// In exchange mode the copies the exchange makes of a body (the parsed
// members and the prefill body during the prefill step, then the decode
// body, held until the response ends) are charged to MaxBodyBytesInFlight
// as the body is, the decode body's room reserved before the prefiller is
// sent anything. A budget with room for them serves the split request and
// is empty afterwards. One with room for the body, not for its copies,
// sends the body as it came to the decode endpoint, which prefills it
// (fallback body_budget), the prefiller untouched; before, the prefill ran
// and the request was then answered 503, its prefill wasted. With the
// client's own kv_transfer_params kept, going as it came takes a copy
// too: without room for it, 503 body_budget, the prefiller untouched.
func TestExchangeChargesTheDecodeBodyToTheBodyBudget(t *testing.T) {
	defer leakcheck.Check(t)()
	dec := startRoleEngine(t, server.RoleDecode, server.PDConfig{}, false, 0)
	pre := startRoleEngine(t, server.RolePrefill, server.PDConfig{}, false, 0)
	defer dec.close(t)
	defer pre.close(t)
	eps := []kvroute.Endpoint{dec.endpoint(disagg.RoleDecode), pre.endpoint(disagg.RolePrefill)}
	bodyOf := func(seed int) []byte {
		b, err := json.Marshal(map[string]any{"model": testModel, "max_tokens": 2, "prompt": words(seed, 600)})
		require.NoError(t, err)
		return b
	}

	start := func(limit int64, allowTransfer bool) *Server {
		cfg := kvroute.DefaultConfig()
		cfg.Model = testModel
		cfg.BlockSize = 16
		cfg.Events.Enabled = new(true)
		gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps,
			Proxy:      Config{MaxBodyBytes: limit, MaxBodyBytesInFlight: limit, AllowClientKVTransferParams: allowTransfer},
			Disagg:     &disagg.Config{NonCachedTokens: 256},
			DisaggHost: DisaggHostConfig{Mode: DisaggModeExchange, Exchange: sidecar.Config{}}}, Options{})
		require.NoError(t, err)
		waitFor(t, "every engine's KV-event stream live", func() bool {
			for _, e := range []*roleEngine{dec, pre} {
				st, ok := gw.Router().Events().Status(e.id)
				if !ok || st.State != kvevents.StateLive {
					return false
				}
			}
			return true
		})
		return gw
	}
	post := func(gw *Server, body []byte) (*http.Response, string) {
		c := &http.Client{Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		resp, err := c.Post(gw.URL()+"/v1/completions", "application/json", strings.NewReader(string(body)))
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp, string(b)
	}

	// Room for both: split, served, and every byte given back.
	gw := start(DefaultMaxBodyBytes, false)
	resp, b := post(gw, bodyOf(31))
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	require.Equal(t, eps[1].ID, resp.Header.Get(HeaderPrefillEndpoint), "the prefill step ran")
	require.Empty(t, resp.Header.Get(HeaderPrefillFallback))
	waitFor(t, "the budget released", func() bool { return gw.Handler().budget.InUse() == 0 })
	require.NoError(t, gw.Shutdown(context.Background()))

	prefills := pre.srv.Engine().Stats().GenerationTokens // one token each
	require.Equal(t, uint64(1), prefills)

	// Room for the body (read into a buffer of its announced size), not
	// for its copies. A new prompt, which the decode engine does not hold,
	// is decided split.
	body := bodyOf(32)
	gw = start(int64(len(body))*3/2, false)
	resp, b = post(gw, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	require.Equal(t, sidecar.ReasonBodyBudget, resp.Header.Get(HeaderPrefillFallback))
	require.Equal(t, prefills, pre.srv.Engine().Stats().GenerationTokens, "the prefiller did nothing")
	// The request is counted once the handler returns, which may be after
	// the client has read the whole response.
	waitFor(t, "the request counted", func() bool { return counter(t, gw.Registry(), "completions", ResultSuccess) == 1 })
	require.Zero(t, counter(t, gw.Registry(), "completions", ResultBodyBudget))
	waitFor(t, "the budget released", func() bool { return gw.Handler().budget.InUse() == 0 })
	require.NoError(t, gw.Shutdown(context.Background()))

	// The client's own kv_transfer_params kept: the body cannot go as it
	// came without a copy, which finds no room either.
	var m map[string]any
	require.NoError(t, json.Unmarshal(bodyOf(33), &m))
	m["kv_transfer_params"] = map[string]any{"do_remote_prefill": false}
	body, err := json.Marshal(m)
	require.NoError(t, err)
	gw = start(int64(len(body))*3/2, true)
	defer func() { require.NoError(t, gw.Shutdown(context.Background())) }()
	resp, b = post(gw, body)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, b)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Contains(t, b, "request bodies in flight")
	waitFor(t, "the refusal counted", func() bool { return counter(t, gw.Registry(), "completions", ResultBodyBudget) == 1 })
	require.Zero(t, counter(t, gw.Registry(), "completions", ResultSuccess))
	require.Equal(t, prefills, pre.srv.Engine().Stats().GenerationTokens, "the prefiller did nothing")
	waitFor(t, "the budget released", func() bool { return gw.Handler().budget.InUse() == 0 })
}
