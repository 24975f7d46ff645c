package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/simengine/server"
)

// In exchange mode the prefill step sends a body over its
// exchange.maxBodyBytes to no prefiller, a limit only a split request
// meets. Left zero, that limit is the gateway's own body limit
// (Proxy.MaxBodyBytes, or sidecar's default when that is higher), not
// sidecar's default alone: a gateway whose limit was raised to 64 MiB
// answered a 40 MiB request 413 whenever the router split it, and served
// it when it did not. An exchange limit the configuration sets is kept.
func TestExchangeBodyLimitDefaultsToTheGatewayLimit(t *testing.T) {
	defer leakcheck.Check(t)()
	limit := func(proxy, exchange int64) int64 {
		cfg := kvroute.DefaultConfig()
		cfg.Model = testModel
		cfg.Events.Enabled = new(false)
		gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg,
			Proxy:      Config{MaxBodyBytes: proxy},
			Disagg:     &disagg.Config{},
			DisaggHost: DisaggHostConfig{Mode: DisaggModeExchange, Exchange: sidecar.Config{MaxBodyBytes: exchange}}}, Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, gw.Shutdown(t.Context())) }()
		return gw.Handler().exchanger.x.Config().MaxBodyBytes
	}
	require.Equal(t, int64(2*DefaultMaxBodyBytes), limit(2*DefaultMaxBodyBytes, 0), "a raised gateway limit")
	require.Equal(t, int64(sidecar.DefaultMaxBodyBytes), limit(0, 0), "the defaults")
	require.Equal(t, int64(sidecar.DefaultMaxBodyBytes), limit(1<<20, 0), "a lowered gateway limit: sidecar's default, above any body the gateway takes")
	require.Equal(t, int64(1<<20), limit(2*DefaultMaxBodyBytes, 1<<20), "a limit the configuration sets")
}

// An exchange.maxBodyBytes set below the gateway's own limit bounds what
// goes to a prefiller, not what the gateway serves: a split body over it
// goes to the decode endpoint alone, which prefills it (fallback
// body_too_large, counted), the prefiller untouched; a body within it
// still splits. Before, it was answered 413.
func TestExchangeBodyOverTheExchangeLimitPrefillsLocally(t *testing.T) {
	defer leakcheck.Check(t)()
	dec := startRoleEngine(t, server.RoleDecode, server.PDConfig{}, false, 0)
	pre := startRoleEngine(t, server.RolePrefill, server.PDConfig{}, false, 0)
	defer dec.close(t)
	defer pre.close(t)
	eps := []kvroute.Endpoint{dec.endpoint(disagg.RoleDecode), pre.endpoint(disagg.RolePrefill)}
	small, err := json.Marshal(map[string]any{"model": testModel, "max_tokens": 2, "prompt": words(51, 600)})
	require.NoError(t, err)
	large, err := json.Marshal(map[string]any{"model": testModel, "max_tokens": 2, "prompt": words(52, 1200)})
	require.NoError(t, err)
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.BlockSize = 16
	cfg.Events.Enabled = new(true)
	gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps,
		Disagg:     &disagg.Config{NonCachedTokens: 256},
		DisaggHost: DisaggHostConfig{Mode: DisaggModeExchange, Exchange: sidecar.Config{MaxBodyBytes: int64(len(small))}}}, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, gw.Shutdown(context.Background())) }()
	waitFor(t, "every engine's KV-event stream live", func() bool {
		for _, e := range []*roleEngine{dec, pre} {
			if st, ok := gw.Router().Events().Status(e.id); !ok || st.State != kvevents.StateLive {
				return false
			}
		}
		return true
	})
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	post := func(body []byte) *http.Response {
		resp, err := c.Post(gw.URL()+"/v1/completions", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		return resp
	}

	resp := post(small)
	require.Empty(t, resp.Header.Get(HeaderPrefillFallback))
	require.Equal(t, pre.id, resp.Header.Get(HeaderPrefillEndpoint), "a body within the limit splits")
	prefills := pre.srv.Engine().Stats().GenerationTokens

	resp = post(large)
	require.Equal(t, sidecar.ReasonBodyTooLarge, resp.Header.Get(HeaderPrefillFallback))
	require.Empty(t, resp.Header.Get(HeaderPrefillEndpoint))
	require.Equal(t, dec.id, resp.Header.Get(HeaderEndpoint))
	require.Equal(t, prefills, pre.srv.Engine().Stats().GenerationTokens, "the prefiller did nothing")
	require.Equal(t, 1.0, pdCounter(t, gw, "kvroute_sidecar_prefill_fallbacks_total", "reason", sidecar.ReasonBodyTooLarge))
	// Counted once the handler returns, which may be after the client
	// read the whole response.
	waitFor(t, "both requests counted", func() bool { return counter(t, gw.Registry(), "completions", ResultSuccess) == 2 })
	waitFor(t, "the budget released", func() bool { return gw.Handler().budget.InUse() == 0 })
}
