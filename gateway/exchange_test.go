package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/render"
)

// DisaggHostConfig accepts the two modes (and none), refuses an unknown
// mode, a decoderURL and an invalid exchange; NewServer refuses it
// without Disagg.
func TestDisaggHostConfigValidate(t *testing.T) {
	for _, c := range []DisaggHostConfig{{}, {Mode: DisaggModeHeader}, {Mode: DisaggModeExchange, Exchange: sidecar.Config{PrefillTimeout: time.Second}}} {
		require.NoError(t, c.Validate(), c)
	}
	for c, want := range map[*DisaggHostConfig]string{
		{Mode: "sidecar"}: `mode "sidecar"`,
		{Exchange: sidecar.Config{DecoderURL: "http://127.0.0.1:1"}}: "decoderURL",
		{Exchange: sidecar.Config{PrefillTimeout: -time.Second}}:     "prefillTimeout",
		{Exchange: sidecar.Config{PrefillerScheme: "ftp"}}:           "prefillerScheme",
	} {
		require.ErrorContains(t, c.Validate(), want)
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	_, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg,
		DisaggHost: DisaggHostConfig{Mode: DisaggModeExchange}}, Options{})
	require.ErrorContains(t, err, "without disagg")
}

// In exchange mode the profile's splitAPIs may name every API the exchange
// splits, which is every API kvroute routes: Messages too, since the
// exchange splits /v1/messages (before, it passed Messages to the decode
// endpoint whole and refused the name); a name that is no API is refused.
func TestDisaggHostConfigValidateForSplitAPIs(t *testing.T) {
	all := disagg.Config{SplitAPIs: []render.API{render.APICompletions, render.APIChatCompletions, render.APIResponses, render.APIMessages}}
	msgs := disagg.Config{SplitAPIs: []render.API{render.APIChatCompletions, render.APIMessages}}
	x := DisaggHostConfig{Mode: DisaggModeExchange}
	require.NoError(t, x.ValidateFor(disagg.Config{}))
	require.NoError(t, x.ValidateFor(all))
	require.NoError(t, x.ValidateFor(msgs))
	require.ErrorContains(t, x.ValidateFor(disagg.Config{SplitAPIs: []render.API{"embeddings"}}), `splitAPIs names "embeddings"`)
	require.NoError(t, DisaggHostConfig{}.ValidateFor(msgs))
	require.ErrorContains(t, DisaggHostConfig{Mode: "sidecar"}.ValidateFor(all), `mode "sidecar"`)

	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Disagg: &msgs, DisaggHost: x}, Options{})
	require.NoError(t, err)
	require.NoError(t, gw.Shutdown(t.Context()))
}

// endpointHostPort is the endpoint's ID, or its Address's host:port.
func TestEndpointHostPort(t *testing.T) {
	require.Equal(t, "10.0.0.1:8000", endpointHostPort(kvroute.Endpoint{ID: "10.0.0.1:8000"}))
	require.Equal(t, "pod-a:9000", endpointHostPort(kvroute.Endpoint{ID: "a", Address: "http://pod-a:9000/"}))
	require.Equal(t, "pod-a:443", endpointHostPort(kvroute.Endpoint{ID: "a", Address: "https://pod-a"}))
	require.Equal(t, "pod-a:80", endpointHostPort(kvroute.Endpoint{ID: "a", Address: "http://pod-a"}))
}

// The exchange mode's metrics are registered all or none, and closing the
// state unregisters them, so another gateway Handler can register them on
// the same registry.
func TestExchangeStateRegistersAllOrNoneAndUnregisters(t *testing.T) {
	reg := prometheus.NewRegistry()
	x, err := newExchangeState(sidecar.Config{}, reg, nil, http.DefaultTransport)
	require.NoError(t, err)
	x.close()
	x, err = newExchangeState(sidecar.Config{}, reg, nil, http.DefaultTransport)
	require.NoError(t, err, "a closed state left a metric registered")
	x.close()

	// The retries counter's name is taken: the exchange's own metrics do
	// not stay registered either, so a later state registers them all.
	taken := prometheus.NewCounter(prometheus.CounterOpts{Name: "kvroute_gateway_disagg_decode_retries_total", Help: retriesHelp})
	require.NoError(t, reg.Register(taken))
	_, err = newExchangeState(sidecar.Config{}, reg, nil, http.DefaultTransport)
	require.Error(t, err)
	require.True(t, reg.Unregister(taken))
	x, err = newExchangeState(sidecar.Config{}, reg, nil, http.DefaultTransport)
	require.NoError(t, err, "a failed state left the exchange's metrics registered")
	x.close()
}
