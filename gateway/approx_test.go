package gateway

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// deadEventsAddress is a loopback address nothing listens on: an endpoint
// given it as its KV-event address never has a live stream. Its port lies
// outside the ephemeral range (testport), so no other socket's bind to port
// 0 takes it and answers.
func deadEventsAddress(t *testing.T) string {
	t.Helper()
	return "tcp://" + testport.Addr(t)
}

// startModeFleet starts one simulated engine per entry of events (KV events
// published or not) behind a precise gateway without speculative entries
// (so that only the approximate index can bring a prompt back to where it
// was sent), with approximate as its gateway.approximate. Every endpoint's
// KV-event address is dead at first; f.eps[i] keeps the engine's real ones
// in realEps.
func startModeFleet(t *testing.T, events []bool, ac *approx.Config) (f *simFleet, realEps []kvroute.Endpoint) {
	t.Helper()
	f = &simFleet{client: &http.Client{Transport: &http.Transport{}}}
	for _, on := range events {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		id := ln.Addr().String()
		kv := server.KVEventsConfig{}
		if on {
			replay := "tcp://127.0.0.1:0"
			kv = server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
				ReplayEndpoint: &replay, Topic: "kv@" + id + "@" + testModel}
		}
		srv, err := server.New(server.Config{Model: testModel, EnableScaleOut: true,
			Engine:   simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond},
			KVEvents: kv}, server.Options{})
		require.NoError(t, err)
		ch := make(chan error, 1)
		go func() { ch <- srv.Serve(ln) }()
		f.engines, f.served = append(f.engines, srv), append(f.served, ch)
		f.eps = append(f.eps, kvroute.Endpoint{ID: id, EventsAddress: deadEventsAddress(t)})
		real := kvroute.Endpoint{ID: id}
		if on {
			real.EventsAddress, real.ReplayAddress = srv.KVEventsEndpoint(), srv.ReplayEndpoint()
		}
		realEps = append(realEps, real)
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.Speculative.Enabled = new(false)
	var err error
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: f.eps,
		Proxy: Config{ObserveCachedTokens: true}, Approximate: ac}, Options{})
	require.NoError(t, err)
	return f, realEps
}

// last returns the gateway's latest decision once n have been recorded. The
// record is added after the response is written, so a client can hold the
// whole response before its record exists: wait on the count of records
// ever added, which, unlike the ring's length, keeps growing past its size.
func (f *simFleet) last(t *testing.T, n int) DecisionRecord {
	t.Helper()
	require.Eventually(t, func() bool { return f.gw.Handler().recent.Added() >= n }, wait, time.Millisecond)
	return f.gw.Handler().Recent()[0]
}

func (f *simFleet) ready(t *testing.T) (body struct {
	Endpoints               []struct{ ID, State, Mode string }
	CacheModes, ModeWarning string
}) {
	t.Helper()
	_, raw := f.get(t, "/ready")
	require.NoError(t, json.Unmarshal([]byte(raw), &body), raw)
	return body
}

func modeOfReady(t *testing.T, f *simFleet, id string) string {
	for _, e := range f.ready(t).Endpoints {
		if e.ID == id {
			return e.Mode
		}
	}
	t.Fatalf("%s not on /ready", id)
	return ""
}

// An engine whose KV events do not reach the router is routed from the
// router's own decisions: its repeated prefix keeps going to it, and the
// status page, /ready and the metrics say approximate. Once its events
// flow, it is routed precisely and its approximate entries are gone.
func TestGatewayApproximateThenPrecise(t *testing.T) {
	defer leakcheck.Check(t)()
	f, realEps := startModeFleet(t, []bool{true, true}, &approx.Config{Enabled: true, Refresh: 5 * time.Millisecond})
	defer f.close(t)
	a, b := f.eps[0].ID, f.eps[1].ID
	// b's events flow from the start; a's address is dead.
	require.NoError(t, f.gw.SetEndpoints([]kvroute.Endpoint{f.eps[0], realEps[1]}))
	require.Eventually(t, func() bool { return modeOfReady(t, f, b) == "precise" }, wait, 5*time.Millisecond)
	require.Equal(t, "approximate", modeOfReady(t, f, a))

	// Find a prompt the load-only pick sends to a.
	n := 0
	var prompt string
	for i := 0; ; i++ {
		require.Less(t, i, 64, "no prompt went to %s", a)
		prompt = fmt.Sprintf("approximate %d ", i) + strings.Repeat("shared context ", 40)
		resp := f.complete(t, prompt)
		n++
		if resp.Header.Get(HeaderEndpoint) == a {
			break
		}
	}
	require.Equal(t, "approximate", f.last(t, n).CacheMode)
	entries := f.gw.approx.Entries(a)
	require.Positive(t, entries)
	for range 4 {
		resp := f.complete(t, prompt)
		n++
		require.Equal(t, a, resp.Header.Get(HeaderEndpoint), "the prefix goes back where it was sent")
		rec := f.last(t, n)
		require.Equal(t, "approximate", rec.CacheMode)
		require.Positive(t, rec.PredictedCached)
	}
	reg := f.gw.Registry()
	require.GreaterOrEqual(t, counterOf(t, reg, "kvroute_router_decision_mode_total", "mode", "approximate"), 5.0)
	_, page := f.get(t, StatusPath)
	require.Contains(t, page, `id="mode-warning"`)
	require.Contains(t, page, `<td class="mode approximate">approximate (`)
	require.Contains(t, page, `<td class="mode precise">precise</td>`)
	body := f.ready(t)
	require.Equal(t, "1 precise, 1 approximate, 0 blind", body.CacheModes)
	require.NotEmpty(t, body.ModeWarning)
	metrics := scrape(t, f)
	require.Contains(t, metrics, `kvroute_approx_endpoint_mode{endpoint="`+a+`",mode="approximate"} 1`)

	// a's events start flowing: the replay brings what the engine holds.
	require.NoError(t, f.gw.SetEndpoints(realEps))
	require.Eventually(t, func() bool {
		for _, e := range f.gw.Router().Readiness() {
			if e.ID == a {
				return e.State == kvevents.StateLive
			}
		}
		return false
	}, wait, 5*time.Millisecond)
	deadline := time.Now().Add(wait)
	for {
		resp := f.complete(t, prompt)
		n++
		rec := f.last(t, n)
		if rec.CacheMode == "precise" {
			require.Equal(t, a, resp.Header.Get(HeaderEndpoint), "the engine's events say a holds the prompt")
			require.Positive(t, rec.PredictedCached)
			break
		}
		require.True(t, time.Now().Before(deadline), "a never became precise")
	}
	require.Zero(t, f.gw.approx.Entries(a), "the approximate entries are dropped")
	require.Equal(t, "precise", modeOfReady(t, f, a))
	require.GreaterOrEqual(t, counterOf(t, reg, "kvroute_approx_evictions_total", "reason", "live"), float64(entries))
	body = f.ready(t)
	require.Equal(t, "2 precise, 0 approximate, 0 blind", body.CacheModes)
	require.Empty(t, body.ModeWarning)
	_, page = f.get(t, StatusPath)
	require.NotContains(t, page, `id="mode-warning"`)
}

// An engine that publishes no KV events, with no approximate index
// configured, is routed blind, and says so.
func TestGatewayBlindWithoutEventsOrApproximate(t *testing.T) {
	defer leakcheck.Check(t)()
	f, _ := startModeFleet(t, []bool{false}, nil)
	defer f.close(t)
	a := f.eps[0].ID
	f.complete(t, strings.Repeat("blind ", 100))
	require.Equal(t, "blind", f.last(t, 1).CacheMode)
	require.Equal(t, "blind", modeOfReady(t, f, a))
	body := f.ready(t)
	require.Equal(t, "0 precise, 0 approximate, 1 blind", body.CacheModes)
	require.Contains(t, body.ModeWarning, "1 blind")
	_, page := f.get(t, StatusPath)
	require.Contains(t, page, `<td class="mode blind">blind</td>`)
	require.Equal(t, 1.0, counterOf(t, f.gw.Registry(), "kvroute_router_decision_mode_total", "mode", "blind"))
	require.Contains(t, scrape(t, f), `kvroute_approx_endpoint_mode{endpoint="`+a+`",mode="blind"} 1`)
}

// counterOf is the value of the counter name{label=value} in reg (0 when
// absent).
func counterOf(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	return regCounter(t, reg, name, label, value)
}

// scrape returns the gateway's /metrics page.
func scrape(t *testing.T, f *simFleet) string {
	t.Helper()
	_, body := f.get(t, "/metrics")
	return body
}
