package gateway

import (
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// startAliasFleet is a gateway in multi-model mode (router model "a",
// speculative entries off, so that every predicted hit comes from the
// engines' KV events; the models poller on) over two simulated engines
// that serve model "a" under the further name "b", as vLLM's
// --served-model-name a b does, and publish on kv@<ip:port>@a over real
// ZeroMQ. rules is the gateway's rewrite table.
func startAliasFleet(t *testing.T, rules []models.Rule) *modelFleet {
	t.Helper()
	f := &modelFleet{client: &http.Client{Transport: &http.Transport{}}, model: map[string]string{}}
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		id := ln.Addr().String()
		replay := "tcp://127.0.0.1:0" // events published before the router subscribed are replayed
		srv, err := server.New(server.Config{Model: "a", ServedModelAliases: []string{"b"}, EnableScaleOut: true,
			Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond},
			KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
				ReplayEndpoint: &replay, Topic: "kv@" + id + "@a"}}, server.Options{})
		require.NoError(t, err)
		ch := make(chan error, 1)
		go func() { ch <- srv.Serve(ln) }()
		f.engines, f.served = append(f.engines, srv), append(f.served, ch)
		f.eps = append(f.eps, kvroute.Endpoint{ID: id, EventsAddress: srv.KVEventsEndpoint(), ReplayAddress: srv.ReplayEndpoint()})
		f.model[id] = "a"
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = "a"
	cfg.Speculative.Enabled = new(false)
	var err error
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: f.eps,
		Models: &models.Config{Poll: models.PollConfig{Enabled: true, Interval: time.Hour}, Rewrites: rules}}, Options{})
	require.NoError(t, err)
	f.waitPolled(t)
	for _, e := range f.gw.Handler().Endpoints() {
		require.Equal(t, []string{"a", "b"}, e.Models, "the poller reads both served names off %s's /v1/models", e.ID)
	}
	return f
}

// warmDirect caches prompt on engine id by a request for "a" sent to the
// engine itself, then waits until the router's index holds on id every
// block the engine holds, and returns that many blocks.
func (f *modelFleet) warmDirect(t *testing.T, id, prompt string) int {
	t.Helper()
	require.Zero(t, f.direct(t, id, "a", prompt))
	want := f.engineOf(t, id).Engine().CachedTokens(simengine.Tokenize(nil, prompt)) / 64
	require.Positive(t, want)
	require.Eventually(t, func() bool { return f.held(t, "a", prompt)[id] == want },
		time.Minute, 10*time.Millisecond, "the %d blocks of the prompt never all indexed on %s", want, id)
	return want
}

// responseModel is the "model" of an engine's answer.
func responseModel(t *testing.T, body string) string {
	t.Helper()
	var out struct {
		Model string `json:"model"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out), body)
	return out.Model
}

// directModel sends a completion for model to engine id itself and returns
// the "model" its answer names.
func (f *modelFleet) directModel(t *testing.T, id, model, prompt string) string {
	t.Helper()
	return responseModel(t, f.directBody(t, id, model, prompt))
}

// With a rewrite from the alias to the first served name, a request for
// "b" is routed as "a": to the engine warm with the prompt an earlier
// request for "a" cached, with the router's prediction equal to what the
// engine reports as cached, and the client reads the "model" it would
// read talking to the engine directly with "b".
func TestGatewayRoutesAServedModelAliasRewrittenToTheFirstName(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAliasFleet(t, []models.Rule{{Model: "b", Targets: []models.Target{{Model: "a"}}}})
	defer f.close(t)
	warm := f.eps[1].ID
	p := longPrompt("alias")
	n := f.warmDirect(t, warm, p)
	require.Zero(t, f.held(t, "a", p)[f.eps[0].ID])

	code, ep, predicted, body := f.complete(t, "b", p)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, warm, ep, "the alias follows the first name's cache")
	require.Equal(t, n*64, predicted)
	require.Equal(t, usageCached(t, body), predicted, "the prediction is what the engine found cached")
	require.Equal(t, "a", responseModel(t, body))
	require.Equal(t, 1.0, rewrites(t, f.gw.Registry(), "b", "a"))
	require.Equal(t, map[string]float64{f.eps[0].ID: 0, f.eps[1].ID: 0}, regtest.ByLabel(t, f.gw.Registry(), "kvroute_models_unrewritten_aliases", "endpoint"),
		"the rewrite maps the alias: nothing to report")
	require.Equal(t, "a", f.directModel(t, f.eps[0].ID, "b", longPrompt("direct")),
		"the engine itself answers a request for b with a as well")
}

// Without the rewrite the gateway serves "b" as a model of its own: the
// poller read it off the engines' /v1/models, so the request is routed and
// served, but the router roots its block keys with "b" while the engines'
// events (topic kv@<ip:port>@a) are indexed under "a", so it predicts no
// cached tokens where the engine finds the whole prefix cached. kvroute does
// not infer aliases from /v1/models; the rewrite is how to serve them.
func TestGatewayWithoutARewriteRoutesAServedModelAliasCold(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAliasFleet(t, nil)
	defer f.close(t)
	p := longPrompt("alias")
	var n int
	for _, e := range f.eps { // both warm, so whichever is picked holds the prompt
		n = f.warmDirect(t, e.ID, p)
	}
	for _, e := range f.eps {
		require.Zero(t, f.held(t, "b", p)[e.ID], "a's blocks are not b's in the index")
	}

	code, ep, predicted, body := f.complete(t, "b", p)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, []string{f.eps[0].ID, f.eps[1].ID}, ep)
	require.Zero(t, predicted, "no block keyed under b")
	require.Equal(t, n*64, usageCached(t, body), "the engine served b from a's blocks")
	require.Equal(t, "a", responseModel(t, body))
	require.Zero(t, rewrites(t, f.gw.Registry(), "b", "a"))
	require.Equal(t, map[string]float64{f.eps[0].ID: 1, f.eps[1].ID: 1}, regtest.ByLabel(t, f.gw.Registry(), "kvroute_models_unrewritten_aliases", "endpoint"),
		"each engine lists b with a's root and no rewrite maps it")
}
