package gateway

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// startMultiModelFleet is a gateway (router model alpha, speculative entries
// off so that every cache hit comes from the engines' KV events) over three
// simulated engines: "multi" serves alpha and beta (server.Config's
// ExtraModels: one engine per model behind one address, both publishing
// through one ZeroMQ socket on kv@<ip:port>@alpha and kv@<ip:port>@beta),
// "alpha" serves alpha only and "beta" beta only. The gateway's models
// poller learns who serves what from each engine's /v1/models.
func startMultiModelFleet(t *testing.T) (*modelFleet, map[string]string) {
	t.Helper()
	f := &modelFleet{client: &http.Client{Transport: &http.Transport{}}, model: map[string]string{}}
	ids := map[string]string{} // role → endpoint ID
	for _, role := range []string{"multi", "alpha", "beta"} {
		model, extra := role, []string(nil)
		if role == "multi" {
			model, extra = "alpha", []string{"beta"}
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		id := ln.Addr().String()
		replay := "tcp://127.0.0.1:0" // events published before the router subscribed are replayed
		srv, err := server.New(server.Config{Model: model, ExtraModels: extra, EnableScaleOut: true,
			Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond},
			KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
				ReplayEndpoint: &replay, Topic: "kv@" + id + "@" + model}}, server.Options{})
		require.NoError(t, err)
		ch := make(chan error, 1)
		go func() { ch <- srv.Serve(ln) }()
		f.engines, f.served = append(f.engines, srv), append(f.served, ch)
		f.eps = append(f.eps, kvroute.Endpoint{ID: id, EventsAddress: srv.KVEventsEndpoint(), ReplayAddress: srv.ReplayEndpoint()})
		f.model[id], ids[role] = role, id
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = "alpha"
	cfg.Speculative.Enabled = new(false)
	var err error
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: f.eps,
		Models: &models.Config{Poll: models.PollConfig{Enabled: true, Interval: time.Hour}}}, Options{})
	require.NoError(t, err)
	return f, ids
}

// engineOf returns the simulated engine server behind endpoint id.
func (f *modelFleet) engineOf(t *testing.T, id string) *server.Server {
	t.Helper()
	for i, ep := range f.eps {
		if ep.ID == id {
			return f.engines[i]
		}
	}
	t.Fatalf("no engine %s", id)
	return nil
}

// held returns the leading blocks of prompt (as model) each endpoint holds
// in the router's index.
func (f *modelFleet) held(t *testing.T, model, prompt string) map[string]int {
	t.Helper()
	body, err := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 1})
	require.NoError(t, err)
	eps := f.gw.Handler().Endpoints()
	sel, err := f.gw.Router().Match(context.Background(), &kvroute.Request{API: render.APICompletions, Body: body, Model: model}, eps)
	require.NoError(t, err)
	defer sel.Release()
	out := map[string]int{}
	for i := range sel.Len() {
		c := sel.Candidate(i)
		out[c.Endpoint.ID] = c.Match.Blocks
	}
	return out
}

// direct sends a completion to one engine, bypassing the gateway, and
// returns the tokens the engine itself reports as cached.
func (f *modelFleet) direct(t *testing.T, id, model, prompt string) int {
	t.Helper()
	return usageCached(t, f.directBody(t, id, model, prompt))
}

// directBody sends a completion for model to engine id itself and returns
// its answer, checked to be a 200.
func (f *modelFleet) directBody(t *testing.T, id, model, prompt string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 1})
	require.NoError(t, err)
	resp, err := f.client.Post("http://"+id+"/v1/completions", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	b := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	return b
}

// usageCached is the cached prompt tokens an engine's non-streamed answer
// reports (usage.prompt_tokens_details.cached_tokens).
func usageCached(t *testing.T, body string) int {
	t.Helper()
	var out struct {
		Usage struct {
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out), body)
	return out.Usage.Details.Cached
}

// An endpoint serving two models publishes each model's KV events on its
// own topic over one ZeroMQ socket; the router indexes both under their
// models (the same prompt in both models' caches, whose engines hash it
// alike, stays twice), and each model's requests go warm by that model's
// cache only.
func TestGatewayIndexesBothModelsOfOneEndpoint(t *testing.T) {
	defer leakcheck.Check(t)()
	f, id := startMultiModelFleet(t)
	defer f.close(t)
	f.waitPolled(t)
	for _, e := range f.gw.Handler().Endpoints() {
		want := map[string][]string{"multi": {"alpha", "beta"}, "alpha": {"alpha"}, "beta": {"beta"}}[f.model[e.ID]]
		require.ElementsMatch(t, want, e.Models, e.ID)
	}
	// warm waits for the index to hold on endpoint ep every block of prompt
	// that ep's engine for model holds (a long prompt is prefilled in chunks,
	// each published as its own event, so a first positive count may be only
	// the first chunk's) and returns that count.
	warm := func(model, prompt, ep string) int {
		t.Helper()
		want := f.engineOf(t, ep).ModelEngine(model).CachedTokens(simengine.Tokenize(nil, prompt)) / 64
		require.Positive(t, want, "%s's engine on %s holds none of the prompt", model, ep)
		require.Eventually(t, func() bool { return f.held(t, model, prompt)[ep] == want },
			time.Minute, 10*time.Millisecond, "%s's %d blocks never all indexed on %s", model, want, ep)
		return want
	}
	cold := func(model, prompt string, eps ...string) {
		t.Helper()
		got := f.held(t, model, prompt)
		for _, ep := range eps {
			require.Zero(t, got[ep], "%s's index on %s", model, ep)
		}
	}

	// The two-model engine caches one prompt under both models (each
	// model's engine reports its own miss, then a hit).
	shared := longPrompt("shared")
	require.Zero(t, f.direct(t, id["multi"], "alpha", shared))
	require.Zero(t, f.direct(t, id["multi"], "beta", shared), "beta's engine has its own cache")
	require.Positive(t, f.direct(t, id["multi"], "beta", shared))
	n := warm("alpha", shared, id["multi"])
	require.Eventually(t, func() bool { return f.held(t, "beta", shared)[id["multi"]] == n }, time.Minute, 10*time.Millisecond,
		"beta's blocks of the shared prompt indexed beside alpha's on the two-model endpoint")
	require.Equal(t, n, f.held(t, "alpha", shared)[id["multi"]], "alpha's blocks kept when beta's engine stored the same hashes")
	cold("alpha", shared, id["alpha"])
	cold("beta", shared, id["beta"])

	// Through the gateway both models go warm to the two-model endpoint.
	for _, m := range []string{"alpha", "beta"} {
		code, ep, cached, body := f.complete(t, m, shared)
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, id["multi"], ep, "%s follows its own cache", m)
		require.Equal(t, n*64, cached, m)
	}

	// A prompt only alpha's engine there holds is cold for beta.
	only := longPrompt("alpha-only")
	require.Zero(t, f.direct(t, id["multi"], "alpha", only))
	n = warm("alpha", only, id["multi"])
	cold("beta", only, id["multi"], id["beta"])
	code, ep, cached, body := f.complete(t, "alpha", only)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, id["multi"], ep)
	require.Equal(t, n*64, cached)
	code, ep, cached, body = f.complete(t, "beta", only)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, []string{id["multi"], id["beta"]}, ep)
	require.Zero(t, cached, "alpha's cache is not beta's")

	// A prompt the beta-only engine holds draws beta there, never alpha.
	b := longPrompt("beta-only")
	require.Zero(t, f.direct(t, id["beta"], "beta", b))
	n = warm("beta", b, id["beta"])
	cold("beta", b, id["multi"])
	code, ep, cached, body = f.complete(t, "beta", b)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, id["beta"], ep)
	require.Equal(t, n*64, cached)
	code, ep, cached, body = f.complete(t, "alpha", b)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, []string{id["multi"], id["alpha"]}, ep)
	require.Zero(t, cached)

	// The stream of the two-model endpoint counted no unknown topic model.
	mfs, err := f.gw.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		require.NotEqual(t, "kvroute_kv_events_topic_model_unknown_total", mf.GetName(), "a topic counted as naming an unserved model")
	}
}

// A router joining a two-model engine after its events were published
// rebuilds both models' blocks from the engine's snapshot socket: the
// reply carries each extra model's chunks after its topic frame, and the
// router indexes them under that model.
func TestGatewayLoadsATwoModelEngineSnapshot(t *testing.T) {
	defer leakcheck.Check(t)()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	id := ln.Addr().String()
	snap := "tcp://127.0.0.1:0"
	srv, err := server.New(server.Config{Model: "alpha", ExtraModels: []string{"beta"}, EnableScaleOut: true,
		Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond},
		KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
			SnapshotEndpoint: &snap, Topic: "kv@" + id + "@alpha"}}, server.Options{})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	f := &modelFleet{client: &http.Client{Transport: &http.Transport{}}, engines: []*server.Server{srv},
		served: []chan error{served}, model: map[string]string{id: "multi"}}

	// Published before any router subscribed: only the snapshot has them.
	shared, betaOnly := longPrompt("shared"), longPrompt("beta-only")
	require.Zero(t, f.direct(t, id, "alpha", shared))
	require.Zero(t, f.direct(t, id, "beta", shared))
	require.Zero(t, f.direct(t, id, "beta", betaOnly))

	cfg := kvroute.DefaultConfig()
	cfg.Model = "alpha"
	cfg.Speculative.Enabled = new(false)
	f.eps = []kvroute.Endpoint{{ID: id, Models: []string{"alpha", "beta"}, EventsAddress: srv.KVEventsEndpoint(), SnapshotAddress: srv.SnapshotEndpoint()}}
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: f.eps}, Options{})
	require.NoError(t, err)
	defer f.close(t)

	var a, b, ob int
	require.Eventually(t, func() bool {
		a, b, ob = f.held(t, "alpha", shared)[id], f.held(t, "beta", shared)[id], f.held(t, "beta", betaOnly)[id]
		return a > 0 && b == a && ob > 0
	}, time.Minute, 10*time.Millisecond, "both models' blocks rebuilt from the snapshot")
	require.Zero(t, f.held(t, "alpha", betaOnly)[id], "beta's blocks not under alpha")
	code, ep, cached, body := f.complete(t, "beta", betaOnly)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, id, ep)
	require.Equal(t, ob*64, cached)
}
