package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// capacityFleet is a gateway with KV events off and the approximate index
// on, in front of simulated engines; engines marked broken answer /metrics
// with 503 (their exporter is down) and serve everything else.
type capacityFleet struct {
	simFleet
	fronts []*http.Server
}

func startCapacityFleet(t *testing.T, gpuBlocks []int, broken []bool, ac approx.Config) *capacityFleet {
	t.Helper()
	f := &capacityFleet{simFleet: simFleet{client: &http.Client{Transport: &http.Transport{}}}}
	for i, blocks := range gpuBlocks {
		srv, err := server.New(server.Config{Model: testModel, EnableScaleOut: true,
			Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: blocks, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond}}, server.Options{})
		require.NoError(t, err)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		h := srv.Handler()
		if broken[i] {
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/metrics" {
					http.Error(w, "metrics exporter down", http.StatusServiceUnavailable)
					return
				}
				srv.Handler().ServeHTTP(w, r)
			})
		}
		front := &http.Server{Handler: h}
		ch := make(chan error, 1)
		go func() { ch <- front.Serve(ln) }()
		f.engines, f.served, f.fronts = append(f.engines, srv), append(f.served, ch), append(f.fronts, front)
		f.eps = append(f.eps, kvroute.Endpoint{ID: ln.Addr().String()})
	}
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.Speculative.Enabled = new(false) // only the approximate index brings a prefix back
	// A render that gives up on a busy machine routes blind (no prediction,
	// nothing recorded): the test is about renders that answer.
	long := time.Minute
	rc.Render.Timeout, rc.Render.AttemptTimeout, rc.Render.MaxQueueWait = long, &long, &long
	var err error
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: rc, Endpoints: f.eps,
		EngineMetrics: &enginemetrics.Config{Interval: 10 * time.Millisecond, Staleness: time.Hour, Timeout: time.Hour}, // a slow scrape on a busy machine never fails
		Approximate:   &ac}, Options{})
	require.NoError(t, err)
	return f
}

func (f *capacityFleet) close(t *testing.T) {
	f.client.CloseIdleConnections()
	require.NoError(t, f.gw.Shutdown(context.Background()))
	for i, front := range f.fronts {
		require.NoError(t, front.Close())
		<-f.served[i]
		require.NoError(t, f.engines[i].Close())
	}
}

type readyEndpoint struct {
	ID, State, Mode                  string
	Capacity                         int
	CapacitySource, CapacityFallback string
}

func (f *capacityFleet) readyEndpoint(t *testing.T, id string) (readyEndpoint, string) {
	t.Helper()
	var body struct {
		Endpoints       []readyEndpoint
		CapacityWarning string
	}
	_, raw := f.get(t, "/ready")
	require.NoError(t, json.Unmarshal([]byte(raw), &body), raw)
	for _, e := range body.Endpoints {
		if e.ID == id {
			return e, body.CapacityWarning
		}
	}
	t.Fatalf("%s not on /ready: %s", id, raw)
	return readyEndpoint{}, ""
}

// An engine whose KV events are off gets an approximate index sized to its
// own capacity, read from its vllm:cache_config_info (24 GPU blocks of 64
// tokens: 24 router blocks); one whose metrics endpoint is down gets the
// configured capacity, and the fallback is counted, logged and shown on
// /ready, the status page and /metrics. Both are routed approximately.
func TestGatewayApproximateCapacityFromEngine(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startCapacityFleet(t, []int{24, 512}, []bool{false, true},
		approx.Config{Enabled: true, Refresh: 5 * time.Millisecond, Capacity: approx.Capacity{GPUBlocks: 100, BlockSize: 64}})
	defer f.close(t)
	sized, down := f.eps[0].ID, f.eps[1].ID

	var e readyEndpoint
	require.Eventually(t, func() bool {
		e, _ = f.readyEndpoint(t, sized)
		return e.CapacitySource == approx.CapacityEngine
	}, wait, 5*time.Millisecond)
	require.Equal(t, readyEndpoint{ID: sized, State: "no events", Mode: "approximate", Capacity: 24, CapacitySource: approx.CapacityEngine}, e)
	var warning string
	require.Eventually(t, func() bool {
		e, warning = f.readyEndpoint(t, down)
		return e.CapacityFallback != ""
	}, wait, 5*time.Millisecond)
	require.Equal(t, readyEndpoint{ID: down, State: "no events", Mode: "approximate", Capacity: 100, CapacitySource: approx.CapacityDefault,
		CapacityFallback: "metrics_unavailable (last scrape: http_status)"}, e)
	require.Contains(t, warning, down+": metrics_unavailable")
	require.NotContains(t, warning, sized)

	require.Equal(t, 1.0, seriesOf(t, f.gw, "kvroute_approx_capacity_fallbacks_total", "reason", "metrics_unavailable"), "counted once, not per refresh")
	require.Equal(t, 24.0, seriesOf(t, f.gw, "kvroute_approx_endpoint_capacity_blocks", "endpoint", sized, "source", "engine"))
	require.Equal(t, 100.0, seriesOf(t, f.gw, "kvroute_approx_endpoint_capacity_blocks", "endpoint", down, "source", "default"))
	require.Positive(t, seriesOf(t, f.gw, "kvroute_engine_metrics_scrape_failures_total", "endpoint", down, "reason", "http_status"))
	_, page := f.get(t, StatusPath)
	require.Contains(t, page, `id="capacity-warning"`)
	require.Contains(t, page, `24 blocks (engine: 24 GPU, 0 CPU-offload blocks of 64 tokens)`)
	require.Contains(t, page, `fallback: metrics_unavailable (last scrape: http_status)`)

	// Route distinct prompts until the sized engine holds more than its
	// capacity's worth: its index keeps at most 24 blocks, evicting the
	// least recently routed, and a repeated prompt still comes back.
	sent, n := 0, 0
	var last string
	for i := 0; sent < 60; i++ {
		require.Less(t, i, 200, "the sized engine got too few prompts")
		prompt := fmt.Sprintf("capacity %d ", i) + strings.Repeat("context words ", 150)
		resp := f.complete(t, prompt)
		n++
		if resp.Header.Get(HeaderEndpoint) == sized {
			rec := f.last(t, n)
			require.Equal(t, "approximate", rec.CacheMode, "%+v", rec)
			sent += rec.PromptTokens / 64
			last = prompt
		}
		require.LessOrEqual(t, f.gw.approx.Entries(sized), 24)
	}
	require.Positive(t, seriesOf(t, f.gw, "kvroute_approx_evictions_total", "reason", "capacity"))
	resp := f.complete(t, last)
	n++
	require.Equal(t, sized, resp.Header.Get(HeaderEndpoint), "the last prompt sent there is still held")
	require.Positive(t, f.last(t, n).PredictedCached)
}

// With capacityFrom "config" the engines' metrics are not scraped for the
// index, and nothing falls back.
func TestGatewayApproximateCapacityFromConfig(t *testing.T) {
	defer leakcheck.Check(t)()
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: rc,
		Endpoints:   []kvroute.Endpoint{{ID: "127.0.0.1:1"}},
		Approximate: &approx.Config{Enabled: true, CapacityFrom: approx.CapacityFromConfig}}, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, gw.Shutdown(context.Background())) }()
	require.Nil(t, gw.scraper)
	st := gw.approx.Endpoints()
	require.Len(t, st, 1)
	require.Equal(t, approx.CapacityDefault, st[0].CapacitySource)
	require.Empty(t, st[0].CapacityFallback)

	// engineMetrics alone still needs a reader.
	_, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: rc, EngineMetrics: &enginemetrics.Config{}}, Options{})
	require.ErrorContains(t, err, "approximate.enabled")
	_, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: rc, Approximate: &approx.Config{CapacityFrom: "bogus"}}, Options{})
	require.ErrorContains(t, err, "capacityFrom")
}
