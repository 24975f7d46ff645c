package sidecar

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// TestOptionsTakeTheTelemetrySet: an Exchange takes its registerer and
// logger as every kvroute component does, in the telemetry.Set its Options
// embed, and registers its metrics all or none, so that a NewExchange that
// failed on a taken name leaves the registry as it found it.
func TestOptionsTakeTheTelemetrySet(t *testing.T) {
	reg := prometheus.NewRegistry()
	other, err := newMetrics(telemetry.Set{}) // the last of the three taken
	require.NoError(t, err)
	taken := other.prefillSeconds
	require.NoError(t, reg.Register(taken))
	var logs bytes.Buffer
	set := telemetry.Set{Registerer: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))}

	_, err = NewExchange(Config{}, Options{Set: set})
	require.ErrorContains(t, err, "already registered")
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1, "a failed NewExchange left metrics registered")

	require.True(t, reg.Unregister(taken))
	x, err := NewExchange(Config{}, Options{Set: set, AllowTarget: func(string) bool { return false }})
	require.NoError(t, err)
	defer x.Close()
	res, err := x.Prefill(context.Background(), "10.0.0.1:8000", "/v1/completions", http.Header{}, []byte(`{"prompt":"hi"}`))
	require.NoError(t, err)
	require.False(t, res.Split)
	require.Contains(t, logs.String(), ReasonNotAllowed, "the fallback is logged on the Set's logger")
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_prefill_fallbacks_total", "reason", ReasonNotAllowed))
}

// TestCloseUnregistersMetrics: Close unregisters exactly what the
// constructor registered, so that a second Exchange (or Handler) can be
// built on the registry of a closed one, and a closed one leaves the
// registry as it found it.
func TestCloseUnregistersMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	set := telemetry.Set{Registerer: reg}
	first, err := NewExchange(Config{}, Options{Set: set})
	require.NoError(t, err)
	_, err = NewExchange(Config{}, Options{Set: set})
	require.ErrorContains(t, err, "already registered", "one Exchange per registry while it is open")
	first.Close()
	second, err := NewExchange(Config{}, Options{Set: set})
	require.NoError(t, err, "the closed Exchange's metrics are unregistered")
	second.Close()
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Empty(t, families, "a closed Exchange left metrics registered")

	h, err := NewHandler(Config{DecoderURL: "http://127.0.0.1:1"}, Options{Set: set})
	require.NoError(t, err)
	h.Close()
	h, err = NewHandler(Config{DecoderURL: "http://127.0.0.1:1"}, Options{Set: set})
	require.NoError(t, err, "the closed Handler's metrics are unregistered")
	h.Close()
	families, err = reg.Gather()
	require.NoError(t, err)
	require.Empty(t, families, "a closed Handler left metrics registered")
}
