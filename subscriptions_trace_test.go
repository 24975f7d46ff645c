package kvroute

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/publish"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/telemetry"
)

// events.tracing in the router's configuration and the router's
// TracerProvider together trace the KV events arriving over a real ZeroMQ
// socket: the provider reaches the pool.
func TestRouterTracesKVEventsWhenConfigured(t *testing.T) {
	defer leakcheck.Check(t)()
	const engineID = "127.0.0.1:18001"
	pub, err := publish.New(publish.Config{Addr: "tcp://127.0.0.1:0", Endpoint: engineID, Model: testModel}, publish.Options{})
	require.NoError(t, err)
	defer pub.Close()

	cfg, err := LoadConfig(strings.NewReader(`{"disableRender":true,"events":{"replay":false,"tracing":{"enabled":true,"sampleRatio":1}}}`))
	require.NoError(t, err)
	cfg.Model = testModel
	cfg.Events.EventsPort = portOf(t, pub.Endpoint())
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Logger: testLogger(t), TracerProvider: tp}})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.SetEndpoints([]Endpoint{{ID: engineID}}))

	count := func(name string) int {
		n := 0
		for _, s := range exp.GetSpans() {
			if s.Name == name {
				n++
			}
		}
		return n
	}
	var ts float64
	require.Eventually(t, func() bool {
		ts++
		_, err := pub.PublishBatch(&wire.Batch{TS: ts, Events: []wire.Event{{
			Type: wire.EventBlockStored, BlockHashes: []uint64{uint64(ts)}, TokenIDs: prompt(int(ts), 64), BlockSize: 64,
			Medium: "GPU", HasGroup: true, Kind: "full_attention",
		}}})
		require.NoError(t, err)
		return count(kvevents.SpanEventsDecode) > 0
	}, 10*time.Second, 20*time.Millisecond, "no events_decode span")
	require.Positive(t, count(kvevents.SpanEventsReceive))
	require.Positive(t, count(kvevents.SpanEventsProcess))

	// Off in the configuration, the same provider sees no event span.
	r.Close()
	exp.Reset()
	cfg.Events.Tracing.Enabled = false
	r2, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Logger: testLogger(t), TracerProvider: tp}})
	require.NoError(t, err)
	defer r2.Close()
	require.NoError(t, r2.SetEndpoints([]Endpoint{{ID: engineID}}))
	require.Eventually(t, func() bool {
		ts++
		_, err := pub.PublishBatch(&wire.Batch{TS: ts, Events: []wire.Event{{
			Type: wire.EventBlockStored, BlockHashes: []uint64{uint64(ts)}, TokenIDs: prompt(int(ts), 64), BlockSize: 64,
			Medium: "GPU", HasGroup: true, Kind: "full_attention",
		}}})
		require.NoError(t, err)
		st, ok := r2.events.pool.Status(engineID)
		return ok && st.HasApplied
	}, 10*time.Second, 20*time.Millisecond)
	require.Empty(t, exp.GetSpans())
}
