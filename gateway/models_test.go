package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// modelFleet is a gateway over simulated engines of two models: alpha (the
// router's) on the first two, beta on the other two. Each engine publishes
// its KV events on the topic kv@<ip:port>@<model> and lists its model on
// /v1/models, which the gateway's models poller reads.
type modelFleet struct {
	engines []*server.Server
	served  []chan error
	eps     []kvroute.Endpoint
	model   map[string]string // endpoint ID → its model
	gw      *Server
	client  *http.Client
}

func startModelFleet(t *testing.T, mcfg models.Config) *modelFleet {
	t.Helper()
	f := &modelFleet{client: &http.Client{Transport: &http.Transport{}}, model: map[string]string{}}
	for i := range 4 {
		model := "alpha"
		if i >= 2 {
			model = "beta"
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		id := ln.Addr().String()
		srv, err := server.New(server.Config{Model: model, EnableScaleOut: true,
			Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond},
			KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
				Topic: "kv@" + id + "@" + model}}, server.Options{})
		require.NoError(t, err)
		ch := make(chan error, 1)
		go func() { ch <- srv.Serve(ln) }()
		f.engines, f.served = append(f.engines, srv), append(f.served, ch)
		f.eps = append(f.eps, kvroute.Endpoint{ID: id, EventsAddress: srv.KVEventsEndpoint()})
		f.model[id] = model
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = "alpha"
	var err error
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: f.eps, Models: &mcfg}, Options{})
	require.NoError(t, err)
	return f
}

func (f *modelFleet) close(t *testing.T) {
	f.client.CloseIdleConnections()
	require.NoError(t, f.gw.Shutdown(context.Background()))
	for i, e := range f.engines {
		require.NoError(t, e.Close())
		<-f.served[i]
	}
}

// complete posts a completion for model and returns its status, the
// endpoint it went to, the cached tokens the router predicted and the body.
func (f *modelFleet) complete(t *testing.T, model, prompt string) (int, string, int, string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 1})
	require.NoError(t, err)
	resp, err := f.client.Post(f.gw.URL()+"/v1/completions", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	b := readAll(t, resp)
	cached, _ := strconv.Atoi(resp.Header.Get(HeaderCachedTokens))
	return resp.StatusCode, resp.Header.Get(HeaderEndpoint), cached, b
}

// waitPolled waits until the gateway's models poller has read every
// engine's /v1/models (it reads each once at the start).
func (f *modelFleet) waitPolled(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, e := range f.gw.Handler().Endpoints() {
			if len(e.Models) == 0 {
				return false
			}
		}
		return true
	}, time.Minute, 10*time.Millisecond, "the engines' /v1/models were never read")
}

// rewrites reads kvroute_models_rewrites_total{model,target}.
func rewrites(t *testing.T, reg *prometheus.Registry, model, target string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_models_rewrites_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["model"] == model && l["target"] == target {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func longPrompt(tag string) string {
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, "%s%d ", tag, i)
	}
	return b.String()
}

func TestGatewayRoutesEachModelToItsEndpointsAndCache(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startModelFleet(t, models.Config{
		Poll:     models.PollConfig{Enabled: true, Interval: time.Hour},
		Rewrites: []models.Rule{{Model: "canary", Targets: []models.Target{{Model: "alpha", Weight: 1}, {Model: "beta", Weight: 1}}}},
	})
	defer f.close(t)
	// The poller reads every engine's /v1/models once at the start.
	f.waitPolled(t)
	for _, e := range f.gw.Handler().Endpoints() {
		require.Equal(t, []string{f.model[e.ID]}, e.Models)
	}

	resp, err := f.client.Get(f.gw.URL() + "/v1/models")
	require.NoError(t, err)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(readAll(t, resp)), &list))
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	require.Equal(t, []string{"alpha", "beta", "canary"}, ids)

	// Each model's requests go only to its endpoints and match their own
	// cache: the same prompt is cold for beta after alpha served it.
	p := longPrompt("shared")
	code, ep, cached, body := f.complete(t, "alpha", p)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "alpha", f.model[ep])
	require.Zero(t, cached)
	code, ep2, cached, _ := f.complete(t, "alpha", p)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, ep, ep2, "alpha's second request goes where its prefix is")
	require.Positive(t, cached)
	code, bep, cached, body := f.complete(t, "beta", p)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "beta", f.model[bep])
	require.Zero(t, cached, "alpha's cache is not beta's")
	code, bep2, cached, _ := f.complete(t, "beta", p)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, bep, bep2)
	require.Positive(t, cached)
	for i := range 20 {
		for _, m := range []string{"alpha", "beta"} {
			code, ep, _, body := f.complete(t, m, longPrompt(fmt.Sprintf("p%d", i)))
			require.Equal(t, http.StatusOK, code, body)
			require.Equal(t, m, f.model[ep], "a %s request went to %s", m, ep)
		}
	}

	// The rewrite splits by weight; each rewritten request reaches an
	// engine serving its target (the engine answers 404 to another name).
	for i := range 100 {
		code, ep, _, body := f.complete(t, "canary", longPrompt(fmt.Sprintf("c%d", i)))
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, []string{"alpha", "beta"}, f.model[ep])
	}
	a, b := rewrites(t, f.gw.Registry(), "canary", "alpha"), rewrites(t, f.gw.Registry(), "canary", "beta")
	require.InDelta(t, 100, a+b, 0)
	require.Greater(t, a, 20.0, "an even split of 100 draws")
	require.Greater(t, b, 20.0, "an even split of 100 draws")

	// An unknown model: 404 with an OpenAI-style error body, nothing routed.
	code, ep, _, body = f.complete(t, "gamma", p)
	require.Equal(t, http.StatusNotFound, code)
	require.Empty(t, ep)
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	require.Equal(t, "NotFoundError", e.Error.Type)
	require.Equal(t, http.StatusNotFound, e.Error.Code)
	require.Contains(t, e.Error.Message, "gamma")
}

// A body the rewrite table changes is forwarded as a second, rewritten copy
// held with the first until the response ends: both are charged to
// MaxBodyBytesInFlight, and released after the response. A copy that finds
// no room is answered 503 body_budget, nothing forwarded nor counted as a
// rewrite.
func TestGatewayChargesARewrittenBodyToTheBodyBudget(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	u.setInfer(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[]}`))
	})
	newServer := func(limit int64) *Server {
		cfg := testServerConfig(kvroute.Endpoint{ID: u.id})
		cfg.Router.Model = "alpha"
		cfg.Proxy.MaxBodyBytes, cfg.Proxy.MaxBodyBytesInFlight = limit, limit
		cfg.Models = &models.Config{Served: map[string][]string{u.id: {"alpha"}},
			Rewrites: []models.Rule{{Model: "alias", Targets: []models.Target{{Model: "alpha", Weight: 1}}}}}
		srv, err := NewServer(t.Context(), cfg, Options{})
		require.NoError(t, err)
		return srv
	}
	b, err := json.Marshal(map[string]any{"model": "alias", "prompt": strings.Repeat("x", 100<<10), "max_tokens": 1})
	require.NoError(t, err)
	post := func(srv *Server) <-chan int {
		done := make(chan int, 1)
		go func() {
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			resp, err := c.Post(srv.URL()+"/v1/completions", "application/json", strings.NewReader(string(b)))
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		return done
	}

	srv := newServer(DefaultMaxBodyBytes)
	done := post(srv)
	<-entered
	inUse := srv.Handler().budget.InUse()
	close(release)
	require.Equal(t, http.StatusOK, <-done)
	got, _ := u.received()
	require.Contains(t, string(got[0]), `"model":"alpha"`)
	require.GreaterOrEqual(t, inUse, int64(len(b)+len(got[0])),
		"in flight: the %d-byte body and its %d-byte rewritten copy", len(b), len(got[0]))
	require.Eventually(t, func() bool { return srv.Handler().budget.InUse() == 0 }, wait, time.Millisecond,
		"both released after the response")
	require.NoError(t, srv.Shutdown(context.Background()))

	// Room for the body (its buffer at most twice its size), not for the
	// body and its copy.
	srv = newServer(2 * int64(len(b)))
	defer func() { require.NoError(t, srv.Shutdown(context.Background())) }()
	require.Equal(t, http.StatusServiceUnavailable, <-post(srv))
	require.Equal(t, 1.0, counter(t, srv.Registry(), "completions", ResultBodyBudget))
	require.Zero(t, rewrites(t, srv.Registry(), "alias", "alpha"), "a refused copy is no rewrite")
	got, _ = u.received()
	require.Len(t, got, 1, "nothing forwarded")
	require.Zero(t, srv.Handler().budget.InUse())
}

// GET /v1/models lists a rewrite table's name only while one of its
// targets is served: an alias whose targets no endpoint serves is answered
// 404 model_not_found on every request, so the listing must not offer it.
func TestGatewayListsNoAliasWhoseTargetsNobodyServes(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	cfg := testServerConfig(kvroute.Endpoint{ID: u.id})
	cfg.Router.Model = "alpha"
	cfg.Models = &models.Config{Served: map[string][]string{u.id: {"alpha"}},
		Rewrites: []models.Rule{
			{Model: "alias", Targets: []models.Target{{Model: "alpha"}}},
			{Model: "ghost", Targets: []models.Target{{Model: "gone"}}},
			{Model: "half", Targets: []models.Target{{Model: "gone", Weight: 1}, {Model: "alpha", Weight: 9}}},
		}}
	srv, err := NewServer(t.Context(), cfg, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Shutdown(context.Background())) }()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(srv.URL() + "/v1/models")
	require.NoError(t, err)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(readAll(t, resp)), &list))
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	require.Equal(t, []string{"alias", "alpha", "half"}, ids)
	code, _, _, _ := postModel(t, c, srv.URL(), "ghost")
	require.Equal(t, http.StatusNotFound, code, "what is not listed is not served")
}

// postModel posts a one-token completion for model.
func postModel(t *testing.T, c *http.Client, base, model string) (int, string, int, string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"model": model, "prompt": "hi", "max_tokens": 1})
	require.NoError(t, err)
	resp, err := c.Post(base+"/v1/completions", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get(HeaderEndpoint), 0, readAll(t, resp)
}
