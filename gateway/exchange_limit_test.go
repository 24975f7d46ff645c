package gateway

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// In exchange mode the prefill step refuses a body over its
// exchange.maxBodyBytes with 413 (sidecar.ErrTooLarge), a refusal only a
// split request meets. Left zero, that limit is the gateway's own body
// limit (Proxy.MaxBodyBytes, or sidecar's default when that is higher),
// not sidecar's default alone: a gateway whose limit was raised to 64 MiB
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
