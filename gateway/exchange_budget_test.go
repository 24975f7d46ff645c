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

// In exchange mode the decode body, the client's body with the prefiller's
// transfer parameters, is a copy of the body held until the response ends:
// it is charged to MaxBodyBytesInFlight as the body is. A budget with room
// for the body but not for its decode copy answers 503 body_budget; one
// with room for both serves the split request and is empty afterwards.
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

	start := func(limit int64) *Server {
		cfg := kvroute.DefaultConfig()
		cfg.Model = testModel
		cfg.BlockSize = 16
		cfg.Events.Enabled = new(true)
		gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps,
			Proxy:      Config{MaxBodyBytes: limit, MaxBodyBytesInFlight: limit},
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
	gw := start(DefaultMaxBodyBytes)
	resp, b := post(gw, bodyOf(31))
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	require.Equal(t, eps[1].ID, resp.Header.Get(HeaderPrefillEndpoint), "the prefill step ran")
	require.Empty(t, resp.Header.Get(HeaderPrefillFallback))
	waitFor(t, "the budget released", func() bool { return gw.Handler().budget.InUse() == 0 })
	require.NoError(t, gw.Shutdown(context.Background()))

	// Room for the body (read into a buffer of its announced size), not
	// for the body and its decode copy. A new prompt, which the decode
	// engine does not hold, is split.
	body := bodyOf(32)
	gw = start(int64(len(body)) * 3 / 2)
	defer func() { require.NoError(t, gw.Shutdown(context.Background())) }()
	resp, b = post(gw, body)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, b)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Contains(t, b, "request bodies in flight")
	require.Equal(t, 1.0, counter(t, gw.Registry(), "completions", ResultBodyBudget))
	require.Zero(t, counter(t, gw.Registry(), "completions", ResultSuccess))
	waitFor(t, "the budget released", func() bool { return gw.Handler().budget.InUse() == 0 })
}
