package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// loraFleet is a gateway with the LoRA adapter-affinity scorer in front of
// three simulated engines serving adapters sql, chat and code with one
// adapter slot each; the third engine's /metrics is broken (503).
type loraFleet struct {
	engines []*server.Server
	broken  *http.Server
	served  chan error
	eps     []kvroute.Endpoint
	gw      *Server
	client  *http.Client
}

func startLoRAFleet(t *testing.T) *loraFleet {
	t.Helper()
	f := &loraFleet{served: make(chan error, 1), client: &http.Client{Transport: &http.Transport{}}}
	for i := range 3 {
		srv, err := server.New(server.Config{Model: testModel, LoRAModules: []string{"sql", "chat", "code"},
			Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond,
				LoRA: &simengine.LoRAConfig{MaxLoRAs: 1, LoadTime: time.Millisecond}}}, server.Options{})
		require.NoError(t, err)
		f.engines = append(f.engines, srv)
		if i < 2 {
			require.NoError(t, srv.Start("127.0.0.1:0"))
			f.eps = append(f.eps, kvroute.Endpoint{ID: srv.Addr()})
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		f.broken = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/metrics" {
				http.Error(w, "metrics exporter down", http.StatusServiceUnavailable)
				return
			}
			srv.Handler().ServeHTTP(w, r)
		})}
		go func() { f.served <- f.broken.Serve(ln) }()
		f.eps = append(f.eps, kvroute.Endpoint{ID: ln.Addr().String()})
	}
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	var err error
	// A signal is fresh only while the endpoint's last scrape succeeded,
	// so a healthy engine must never fail one here: a loaded machine
	// stretches a scrape past the default 200ms timeout, and the engine
	// would be scored unknown (and the adapter routed elsewhere) until the
	// next scrape. Neither the timeout nor the staleness may depend on how
	// busy the machine is; Close ends the scrapes in flight.
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: rc, Endpoints: f.eps,
		EngineMetrics: &enginemetrics.Config{Interval: 10 * time.Millisecond, Staleness: time.Hour, Timeout: time.Hour},
		LoRA:          &lora.Config{}}, Options{})
	require.NoError(t, err)
	return f
}

func (f *loraFleet) close(t *testing.T) {
	f.client.CloseIdleConnections()
	require.NoError(t, f.gw.Shutdown(context.Background()))
	require.NoError(t, f.broken.Close())
	<-f.served
	for _, e := range f.engines {
		require.NoError(t, e.Close())
	}
}

// complete sends a completion for model to url and returns the status, the
// endpoint the gateway chose (if any) and the body.
func (f *loraFleet) complete(t *testing.T, url, model string) (int, string, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"prompt":"tell me about adapters","max_tokens":2}`, model)
	resp, err := f.client.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	b := readAll(t, resp)
	return resp.StatusCode, resp.Header.Get(HeaderEndpoint), b
}

// Requests for an adapter go to the engine running it; an engine whose
// metrics endpoint is down is scored neutral and counted, and still
// serves; an adapter no engine serves is answered by the engine's 404.
func TestGatewayLoRAAffinity(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startLoRAFleet(t)
	defer f.close(t)
	// Warm: engine 1 runs sql, engine 0 runs chat (sent to them directly).
	code, _, body := f.complete(t, "http://"+f.eps[1].ID, "sql")
	require.Equal(t, http.StatusOK, code, body)
	code, _, body = f.complete(t, "http://"+f.eps[0].ID, "chat")
	require.Equal(t, http.StatusOK, code, body)
	// Wait for the scraper to see both, and for the broken engine's scrape
	// to have failed (its interval is 10ms; bounded by the observation
	// itself).
	require.Eventually(t, func() bool {
		l1, ok1 := f.gw.scraper.LoRA(f.eps[1])
		l0, ok0 := f.gw.scraper.LoRA(f.eps[0])
		failure, done := f.gw.scraper.LastScrape(f.eps[2])
		return ok1 && ok0 && l1.IsRunning("sql") && l0.IsRunning("chat") && done && failure == "http_status"
	}, 20*time.Second, 5*time.Millisecond)

	gw := "http://" + f.gw.Addr()
	for range 5 {
		code, ep, body := f.complete(t, gw, "sql")
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, f.eps[1].ID, ep, "sql runs on engine 1")
		code, ep, body = f.complete(t, gw, "chat")
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, f.eps[0].ID, ep, "chat runs on engine 0")
	}
	require.Equal(t, uint64(1), f.engines[1].Engine().Stats().LoRALoads, "engine 1 loaded sql once, for the warm-up")
	require.Equal(t, uint64(1), f.engines[0].Engine().Stats().LoRALoads)

	// The broken engine: every pick rated it unknown, its failures counted.
	require.GreaterOrEqual(t, seriesOf(t, f.gw, "kvroute_lora_candidates_total", "state", "unknown"), 10.0)
	require.Positive(t, seriesOf(t, f.gw, "kvroute_engine_metrics_scrape_failures_total", "endpoint", f.eps[2].ID, "reason", "http_status"))
	require.Equal(t, 10.0, seriesOf(t, f.gw, "kvroute_lora_candidates_total", "state", "running"))

	// An adapter nobody serves: routed by load, answered by the engine.
	code, _, body = f.complete(t, gw, "no-such-adapter")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, "The model `no-such-adapter` does not exist.")
}

// seriesOf is the value of the gateway's series name with the labels given
// (name, value pairs), 0 when absent.
func seriesOf(t *testing.T, s *Server, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := s.registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func TestGatewayLoRANeedsPrecise(t *testing.T) {
	_, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Policy: PolicyRoundRobin, LoRA: &lora.Config{}}, Options{})
	require.ErrorContains(t, err, "lora")
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	_, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: rc, LoRA: &lora.Config{Weight: -1}}, Options{})
	require.ErrorContains(t, err, "weight")
}

// When no engine's metrics can be read (here the scrape path answers 404
// on every engine), adapter requests are still served: every candidate is
// scored neutral and counted unknown, each failed scrape is counted by
// reason, and the rendezvous spread sends one adapter to one engine rather
// than loading it everywhere. An adapter no engine serves still gets the
// engine's clear 404.
func TestGatewayLoRAEveryEngineMetricsDown(t *testing.T) {
	defer leakcheck.Check(t)()
	var engines []*server.Server
	var eps []kvroute.Endpoint
	for range 2 {
		srv, err := server.New(server.Config{Model: testModel, LoRAModules: []string{"sql", "chat"},
			Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond,
				LoRA: &simengine.LoRAConfig{MaxLoRAs: 1, LoadTime: time.Millisecond}}}, server.Options{})
		require.NoError(t, err)
		require.NoError(t, srv.Start("127.0.0.1:0"))
		engines = append(engines, srv)
		eps = append(eps, kvroute.Endpoint{ID: srv.Addr()})
	}
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: rc, Endpoints: eps,
		EngineMetrics: &enginemetrics.Config{Interval: 10 * time.Millisecond, Path: "/metrics-exporter-down"},
		LoRA:          &lora.Config{}}, Options{})
	require.NoError(t, err)
	f := &loraFleet{gw: gw, client: &http.Client{Transport: &http.Transport{}}}
	defer func() {
		f.client.CloseIdleConnections()
		require.NoError(t, gw.Shutdown(context.Background()))
		for _, e := range engines {
			require.NoError(t, e.Close())
		}
	}()
	// Both engines' scrapes have failed before the requests.
	require.Eventually(t, func() bool {
		for _, ep := range eps {
			if failure, done := gw.scraper.LastScrape(ep); !done || failure != "http_status" {
				return false
			}
		}
		return true
	}, wait, 5*time.Millisecond)

	url := "http://" + gw.Addr()
	chosen := map[string]bool{}
	for range 6 {
		code, ep, body := f.complete(t, url, "sql")
		require.Equal(t, http.StatusOK, code, body)
		chosen[ep] = true
	}
	require.Len(t, chosen, 1, "the rendezvous spread keeps one adapter on one engine")
	require.Equal(t, 12.0, seriesOf(t, gw, "kvroute_lora_candidates_total", "state", "unknown"), "2 candidates × 6 picks")
	for _, ep := range eps {
		require.Positive(t, seriesOf(t, gw, "kvroute_engine_metrics_scrape_failures_total", "endpoint", ep.ID, "reason", "http_status"))
	}
	code, _, body := f.complete(t, url, "no-such-adapter")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, "The model `no-such-adapter` does not exist.")
}

// startAdapterFleet is a multi-model gateway (ServerConfig.Models, its
// poller reading the engines' /v1/models) with the LoRA scorer, in front
// of two simulated engines serving the base model alpha and its adapters
// sql and chat (one adapter slot each), publishing their KV events and
// rendering for the router. poll is the models poller's interval (0: the
// default); the engines serve vLLM's runtime LoRA loading.
func startAdapterFleet(t *testing.T, poll time.Duration) *modelFleet {
	t.Helper()
	return startAdapterFleetWith(t, func([]kvroute.Endpoint) models.Config {
		return models.Config{Poll: models.PollConfig{Enabled: true, Interval: poll}}
	})
}

// startAdapterFleetWith is startAdapterFleet with the models configuration
// mcfg builds from the engines' endpoints.
func startAdapterFleetWith(t *testing.T, mcfg func([]kvroute.Endpoint) models.Config) *modelFleet {
	t.Helper()
	f := &modelFleet{client: &http.Client{Transport: &http.Transport{}}, model: map[string]string{}}
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		id := ln.Addr().String()
		srv, err := server.New(server.Config{Model: "alpha", LoRAModules: []string{"sql", "chat"}, EnableScaleOut: true, AllowRuntimeLoRAUpdating: true,
			Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond,
				LoRA: &simengine.LoRAConfig{MaxLoRAs: 1, LoadTime: time.Millisecond}},
			KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
				Topic: "kv@" + id + "@alpha"}}, server.Options{})
		require.NoError(t, err)
		ch := make(chan error, 1)
		go func() { ch <- srv.Serve(ln) }()
		f.engines, f.served = append(f.engines, srv), append(f.served, ch)
		f.eps = append(f.eps, kvroute.Endpoint{ID: id, EventsAddress: srv.KVEventsEndpoint()})
		f.model[id] = "alpha"
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = "alpha"
	var err error
	// Scrapes that never time out nor go stale: see startLoRAFleet.
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: f.eps,
		Models:        new(mcfg(f.eps)),
		EngineMetrics: &enginemetrics.Config{Interval: 10 * time.Millisecond, Staleness: time.Hour, Timeout: time.Hour},
		LoRA:          &lora.Config{}}, Options{})
	require.NoError(t, err)
	return f
}

// With several models configured, a model an engine lists as a LoRA
// adapter (vLLM's /v1/models gives it its base model as parent) is routed
// as one: the LoRA scorer places it on the engine running it, its blocks
// are matched under the adapter's name exactly as the engine's events key
// them, and the base model's requests are no LoRA requests. The gateway
// used to route the adapter as a model of its own, and the scorer never
// ran.
func TestGatewayModelsRouteAnAdapterOfABaseModelAsLoRA(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAdapterFleet(t, 0)
	defer f.close(t)
	f.waitPolled(t)
	for _, e := range f.gw.Handler().Endpoints() {
		require.Equal(t, []string{"alpha", "sql", "chat"}, e.Models)
	}
	// Warm, directly: engine 1 runs sql over prompt p, engine 0 runs chat.
	// A prompt whose events the gateway missed (published before its
	// subscription took) is never indexed: another one is sent then.
	f.direct(t, f.eps[0].ID, "chat", longPrompt("warm"))
	var p string
	var sent time.Time
	require.Eventually(t, func() bool {
		if time.Since(sent) > 2*time.Second {
			p, sent = longPrompt(fmt.Sprint("adapter", sent.UnixNano())), time.Now()
			f.direct(t, f.eps[1].ID, "sql", p)
		}
		l1, ok1 := f.gw.scraper.LoRA(f.eps[1])
		l0, ok0 := f.gw.scraper.LoRA(f.eps[0])
		return ok1 && ok0 && l1.IsRunning("sql") && l0.IsRunning("chat") && f.held(t, "sql", p)[f.eps[1].ID] > 0
	}, time.Minute, 5*time.Millisecond, "the scrapes or engine 1's sql events never arrived")

	// sql over p: engine 1, warm by the blocks its events stored under sql.
	code, ep, cached, body := f.complete(t, "sql", p)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, f.eps[1].ID, ep)
	require.Positive(t, cached, "the adapter's keys match the blocks the engine stored under its name")
	// Cold prompts go where their adapter runs.
	for i := range 4 {
		code, ep, _, body = f.complete(t, "chat", longPrompt(fmt.Sprint("chat", i)))
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, f.eps[0].ID, ep, "chat runs on engine 0")
		code, ep, _, body = f.complete(t, "sql", longPrompt(fmt.Sprint("sql", i)))
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, f.eps[1].ID, ep, "sql runs on engine 1")
	}
	running := seriesOf(t, f.gw, "kvroute_lora_candidates_total", "state", "running")
	require.GreaterOrEqual(t, running, 9.0, "the LoRA scorer rated the adapters' candidates")
	require.Equal(t, uint64(1), f.engines[1].Engine().Stats().LoRALoads, "engine 1 loaded sql once, for the warm-up")
	require.Equal(t, uint64(1), f.engines[0].Engine().Stats().LoRALoads)

	// The base model: no adapter, nothing for the LoRA scorer to rate.
	rated := 0.0
	for _, st := range []string{"running", "waiting", "load", "load_at_cap", "saturated", "unknown"} {
		rated += seriesOf(t, f.gw, "kvroute_lora_candidates_total", "state", st)
	}
	code, _, _, body = f.complete(t, "alpha", longPrompt("base"))
	require.Equal(t, http.StatusOK, code, body)
	after := 0.0
	for _, st := range []string{"running", "waiting", "load", "load_at_cap", "saturated", "unknown"} {
		after += seriesOf(t, f.gw, "kvroute_lora_candidates_total", "state", st)
	}
	require.Equal(t, rated, after)
}

// An adapter an engine loads at run time (vLLM's /v1/load_lora_adapter)
// appears in the engine's /v1/models, and the gateway's poller routes its
// requests there as LoRA requests; unloaded, it disappears and the gateway
// answers its requests 404 as a model nobody serves.
func TestGatewayModelsPickUpAnAdapterLoadedAtRunTime(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAdapterFleet(t, 20*time.Millisecond)
	defer f.close(t)
	f.waitPolled(t)
	code, _, _, body := f.complete(t, "code", "hello")
	require.Equal(t, http.StatusNotFound, code, body)

	admin := func(path, body string) {
		t.Helper()
		resp, err := f.client.Post("http://"+f.eps[0].ID+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		b := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, b)
	}
	listed := func(want bool) {
		t.Helper()
		require.Eventually(t, func() bool {
			for _, e := range f.gw.Handler().Endpoints() {
				if e.ID == f.eps[0].ID {
					return slices.Contains(e.Models, "code") == want
				}
			}
			return false
		}, time.Minute, 5*time.Millisecond, "the poller never saw code's load or unload")
	}
	admin("/v1/load_lora_adapter", `{"lora_name":"code","lora_path":"/adapters/code"}`)
	listed(true)
	base, ok := f.gw.models.Adapter(f.gw.Handler().Endpoints(), "code")
	require.True(t, ok)
	require.Equal(t, "alpha", base)
	rated := func() float64 {
		n := 0.0
		for _, st := range []string{"running", "waiting", "load", "load_at_cap", "saturated", "unknown"} {
			n += seriesOf(t, f.gw, "kvroute_lora_candidates_total", "state", st)
		}
		return n
	}
	before := rated()
	for range 3 {
		code, ep, _, body := f.complete(t, "code", longPrompt("code"))
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, f.eps[0].ID, ep, "only engine 0 serves code")
	}
	require.Equal(t, before+3, rated(), "each pick rated its one candidate as a LoRA request")

	admin("/v1/unload_lora_adapter", `{"lora_name":"code"}`)
	listed(false)
	code, _, _, body = f.complete(t, "code", "hello")
	require.Equal(t, http.StatusNotFound, code, body)
	require.Contains(t, body, "The model `code` does not exist.")
}

// gatewayModelList reads the gateway's GET /v1/models as generic JSON, so
// that a member left out and a member set to null are told apart.
func gatewayModelList(t *testing.T, c *http.Client, base string) map[string]map[string]any {
	t.Helper()
	resp, err := c.Get(base + "/v1/models")
	require.NoError(t, err)
	body := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var list struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list), body)
	require.Equal(t, "list", list.Object)
	out := map[string]map[string]any{}
	var ids []string
	for _, d := range list.Data {
		id, _ := d["id"].(string)
		ids = append(ids, id)
		out[id] = d
	}
	require.True(t, slices.IsSorted(ids), "listed by id: %v", ids)
	return out
}

// The gateway's GET /v1/models carries the cards the engines' own
// /v1/models gave, in vLLM's ModelCard shape: an adapter with its base
// model as parent and its lora_path as root, the base model with a null
// parent, its root and its max_model_len, owned_by as the engines said. It
// used to list bare names (owned_by "kvroute", no parent, no root), so a
// client or an llm-d component reading the gateway's list could not tell
// an adapter from a base model.
func TestGatewayListsTheEnginesModelCards(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAdapterFleet(t, 20*time.Millisecond)
	defer f.close(t)
	f.waitPolled(t)
	// An adapter loaded at run time on engine 0 only, from a path.
	resp, err := f.client.Post("http://"+f.eps[0].ID+"/v1/load_lora_adapter", "application/json",
		strings.NewReader(`{"lora_name":"code","lora_path":"/adapters/code"}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp))
	require.Eventually(t, func() bool {
		_, ok := gatewayModelList(t, f.client, f.gw.URL())["code"]
		return ok
	}, time.Minute, 5*time.Millisecond, "the poller never saw code's load")

	list := gatewayModelList(t, f.client, f.gw.URL())
	require.Len(t, list, 4)
	for id, card := range list {
		require.Equal(t, "model", card["object"], id)
		require.Equal(t, "vllm", card["owned_by"], id)
		require.Positive(t, card["created"], id)
		require.IsType(t, []any{}, card["permission"], id)
		for _, k := range []string{"root", "parent", "max_model_len"} {
			require.Contains(t, card, k, "%s: vLLM's card has %s, null or not", id, k)
		}
	}
	alpha := list["alpha"]
	require.Nil(t, alpha["parent"], "a base model's parent is null")
	require.Equal(t, "alpha", alpha["root"])
	require.Equal(t, float64(512*64), alpha["max_model_len"], "the engines' max_model_len (their KV capacity)")
	for _, a := range []struct{ id, root string }{{"sql", "sql"}, {"chat", "chat"}, {"code", "/adapters/code"}} {
		card := list[a.id]
		require.Equal(t, "alpha", card["parent"], a.id)
		require.Equal(t, a.root, card["root"], a.id)
		require.Nil(t, card["max_model_len"], "%s: vLLM gives an adapter's card no max_model_len", a.id)
	}
}

// An adapter the gateway knows only from its configuration (models.served
// here; a label or a pod's models annotation alike), which no engine's
// /v1/models reports with a parent, is routed as a LoRA request when
// models.adapters names its base, exactly as one learnt from /v1/models:
// the LoRA scorer rates its candidates and places it on the engine running
// it, and the gateway's /v1/models lists it with its base as parent. It
// used to be routed as a model of its own, the scorer never running.
func TestGatewayRoutesAConfiguredAdapterAsLoRA(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAdapterFleetWith(t, func(eps []kvroute.Endpoint) models.Config {
		served := map[string][]string{}
		for _, e := range eps {
			served[e.ID] = []string{"alpha", "sql", "chat"}
		}
		return models.Config{Served: served, Adapters: map[string]string{"sql": "alpha", "chat": "alpha"}}
	})
	defer f.close(t)
	rated := func() float64 {
		n := 0.0
		for _, st := range []string{"running", "waiting", "load", "load_at_cap", "saturated", "unknown"} {
			n += seriesOf(t, f.gw, "kvroute_lora_candidates_total", "state", st)
		}
		return n
	}
	// Engine 1 runs sql, engine 0 chat, as their scrapes say.
	f.direct(t, f.eps[1].ID, "sql", longPrompt("warm-sql"))
	f.direct(t, f.eps[0].ID, "chat", longPrompt("warm-chat"))
	require.Eventually(t, func() bool {
		l1, ok1 := f.gw.scraper.LoRA(f.eps[1])
		l0, ok0 := f.gw.scraper.LoRA(f.eps[0])
		return ok1 && ok0 && l1.IsRunning("sql") && l0.IsRunning("chat")
	}, time.Minute, 5*time.Millisecond, "the scrapes never reported the adapters")
	before := rated()
	for i := range 3 {
		code, ep, _, body := f.complete(t, "sql", longPrompt(fmt.Sprint("sql", i)))
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, f.eps[1].ID, ep, "sql runs on engine 1")
		code, ep, _, body = f.complete(t, "chat", longPrompt(fmt.Sprint("chat", i)))
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, f.eps[0].ID, ep, "chat runs on engine 0")
	}
	require.Equal(t, before+12, rated(), "each pick rated its two candidates as a LoRA request")
	list := gatewayModelList(t, f.client, f.gw.URL())
	require.Equal(t, "alpha", list["sql"]["parent"])
	require.Equal(t, "alpha", list["chat"]["parent"])
	require.Nil(t, list["alpha"]["parent"])
	// The base model is no LoRA request.
	before = rated()
	code, _, _, body := f.complete(t, "alpha", longPrompt("base"))
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, before, rated())
}
