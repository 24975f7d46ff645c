package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// pdEngine is a simulated vLLM with KV events, served through a handler
// that records the x-prefiller-host-port header of each inference request
// it receives ("" when absent).
type pdEngine struct {
	srv  *server.Server
	hs   *http.Server
	id   string
	done chan error

	mu        sync.Mutex
	prefiller []string
}

func startPDEngine(t *testing.T) *pdEngine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &pdEngine{id: ln.Addr().String(), done: make(chan error, 1)}
	replay := "tcp://127.0.0.1:0"
	e.srv, err = server.New(server.Config{Model: testModel, EnableScaleOut: true,
		Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 4096, PrefillTokensPerSecond: 1e7, DecodeStep: 50 * time.Microsecond},
		KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
			ReplayEndpoint: &replay, Topic: "kv@" + e.id + "@" + testModel},
	}, server.Options{})
	require.NoError(t, err)
	inner := e.srv.Handler()
	e.hs = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/completions" || r.URL.Path == "/v1/messages" || r.URL.Path == "/v1/responses" {
			e.mu.Lock()
			// Both names carry the same prefill endpoint, as llm-d's router
			// writes them.
			pre := r.Header.Get(disagg.HeaderPrefiller)
			if llmd := r.Header.Get(disagg.HeaderPrefillerLLMD); llmd != pre {
				pre = "mismatch: " + pre + " / " + llmd
			}
			e.prefiller = append(e.prefiller, pre)
			e.mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	})}
	go func() { e.done <- e.hs.Serve(ln) }()
	return e
}

func (e *pdEngine) takePrefillers() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.prefiller
	e.prefiller = nil
	return p
}

func (e *pdEngine) close(t *testing.T) {
	require.NoError(t, e.hs.Close())
	require.ErrorIs(t, <-e.done, http.ErrServerClosed)
	require.NoError(t, e.srv.Close())
}

// words returns n distinct words for seed: a prompt no engine holds.
func words(seed, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "w%dx%d ", seed, i)
	}
	return b.String()
}

// Through the gateway, two prefill and two decode simulated engines: a long
// new prompt is split (the decode engine receives x-prefiller-host-port
// naming a prefill engine), a follow-up turn whose prefix the decode engine
// holds is not, a prefill engine holding a document is preferred for it,
// every decision is released once, and the metrics count by role and
// outcome. The engines run as both roles (they prefill what they get), so
// the header is checked where it arrives.
func TestDisaggThroughGateway(t *testing.T) {
	defer leakcheck.Check(t)()
	roles := []string{disagg.RolePrefill, disagg.RolePrefill, disagg.RoleDecode, disagg.RoleDecode}
	engines, eps, gw, client, stop := startDisaggGateway(t, roles)
	defer stop()
	r := gw.Router()
	waitFor(t, "every engine's KV-event stream live", func() bool {
		for _, e := range engines {
			st, ok := r.Events().Status(e.id)
			if !ok || st.State != kvevents.StateLive || e.srv.Publisher().Stats().Subscribed == 0 {
				return false
			}
		}
		return true
	})

	post := func(base, prompt string, hdr map[string]string) *http.Response {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": testModel, "max_tokens": 2, "prompt": prompt})
		req, err := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader(string(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return resp
	}
	byID := map[string]*pdEngine{}
	for _, e := range engines {
		byID[e.id] = e
	}

	// 1. A long new prompt is split.
	turn1 := words(1, 600)
	resp := post(gw.URL(), turn1, nil)
	dec, pre := resp.Header.Get(HeaderEndpoint), resp.Header.Get(HeaderPrefillEndpoint)
	require.Contains(t, []string{eps[2].ID, eps[3].ID}, dec, "a decode engine")
	require.Contains(t, []string{eps[0].ID, eps[1].ID}, pre, "a prefill engine")
	require.Equal(t, []string{pre}, byID[dec].takePrefillers(), "the decode engine was told its prefiller")

	// 2. The follow-up turn, whose prefix the decode engine holds, is
	// prefilled there; a client's own x-prefiller-host-port goes nowhere.
	resp = post(gw.URL(), turn1+words(2, 20), map[string]string{disagg.HeaderPrefiller: "203.0.113.9:1", disagg.HeaderPrefillerLLMD: "203.0.113.9:2"})
	require.Equal(t, dec, resp.Header.Get(HeaderEndpoint))
	require.Empty(t, resp.Header.Get(HeaderPrefillEndpoint), "not split")
	require.Equal(t, []string{""}, byID[dec].takePrefillers(), "no prefiller named to the decode engine")

	// 3. A document one prefill engine holds (it served it, and its events
	// say so) is prefilled there.
	doc := words(3, 800)
	holder := eps[1]
	post("http://"+holder.ID, doc, nil)
	waitFor(t, "the prefill engine's events indexed", func() bool {
		s, err := r.Match(t.Context(), &kvroute.Request{API: render.APICompletions,
			Body: []byte(`{"model":"` + testModel + `","prompt":"` + doc + `"}`)}, []kvroute.Endpoint{holder})
		require.NoError(t, err)
		defer s.Release()
		return s.Candidate(0).Match.Blocks > 0
	})
	resp = post(gw.URL(), doc+words(4, 300), nil)
	require.Equal(t, holder.ID, resp.Header.Get(HeaderPrefillEndpoint))
	d3 := resp.Header.Get(HeaderEndpoint)
	require.Equal(t, []string{holder.ID}, byID[d3].takePrefillers())

	// Every decision released once: nothing stays accounted or filed once
	// the handlers have ended their requests (after the response's last
	// byte).
	waitFor(t, "every request ended", func() bool {
		for _, e := range eps {
			if tok, n, _ := r.Load().Load(e.ID); tok != 0 || n != 0 {
				return false
			}
		}
		return r.Requests().Len() == 0
	})

	// Metrics by outcome and role.
	require.Equal(t, 2.0, pdCounter(t, gw, "kvroute_disagg_decisions_total", "outcome", "split", "reason", "uncached"))
	require.Equal(t, 1.0, pdCounter(t, gw, "kvroute_disagg_decisions_total", "outcome", "local", "reason", "cached"))
	require.Equal(t, 3.0, pdCounter(t, gw, "kvroute_disagg_picks_total", "role", disagg.RoleDecode))
	require.Equal(t, 2.0, pdCounter(t, gw, "kvroute_disagg_picks_total", "role", disagg.RolePrefill))
	require.Zero(t, pdCounter(t, gw, "kvroute_disagg_decode_without_events_total"), "every decode engine's events are live")
}

// Through the gateway, a long new prompt of the Messages or Responses API
// is not split under the default splitAPIs (completions and chat
// completions, what every routing sidecar splits), so no prefiller is
// named to the decode engine, no prefill engine is charged, and the
// decision is counted local with reason "api". It was split: the prefill
// engine was charged the prompt of a request it never got.
func TestDisaggThroughGatewayKeepsOtherAPIsLocal(t *testing.T) {
	defer leakcheck.Check(t)()
	roles := []string{disagg.RolePrefill, disagg.RoleDecode}
	engines, _, gw, client, stop := startDisaggGateway(t, roles)
	defer stop()
	r := gw.Router()
	for i, c := range []struct{ path, body string }{
		{"/v1/messages", `{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":%q}]}`},
		{"/v1/responses", `{"model":%q,"max_output_tokens":2,"input":%q}`},
		{"/v1/completions", `{"model":%q,"max_tokens":2,"prompt":%q}`},
	} {
		resp, err := client.Post(gw.URL()+c.path, "application/json", strings.NewReader(fmt.Sprintf(c.body, testModel, words(50+i, 600))))
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, c.path)
		require.Equal(t, engines[1].id, resp.Header.Get(HeaderEndpoint), c.path)
		if c.path == "/v1/completions" {
			require.Equal(t, engines[0].id, resp.Header.Get(HeaderPrefillEndpoint), "completions are split")
			require.Equal(t, []string{engines[0].id}, engines[1].takePrefillers())
			continue
		}
		require.Empty(t, resp.Header.Get(HeaderPrefillEndpoint), c.path)
		require.Equal(t, []string{""}, engines[1].takePrefillers(), "no prefiller named for %s", c.path)
	}
	waitFor(t, "every request ended", func() bool {
		for _, e := range engines {
			if tok, n, _ := r.Load().Load(e.id); tok != 0 || n != 0 {
				return false
			}
		}
		return r.Requests().Len() == 0
	})
	require.Equal(t, 2.0, pdCounter(t, gw, "kvroute_disagg_decisions_total", "outcome", "local", "reason", "api"))
	require.Equal(t, 1.0, pdCounter(t, gw, "kvroute_disagg_decisions_total", "outcome", "split", "reason", "uncached"))
	require.Equal(t, 1.0, pdCounter(t, gw, "kvroute_disagg_picks_total", "role", disagg.RolePrefill))
}

// waitFor polls cond until it holds; the bound only ends a test that would
// otherwise hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pdCounter returns the value of the gateway's counter name with the label
// pairs given.
func pdCounter(t *testing.T, gw *Server, name string, labels ...string) float64 {
	t.Helper()
	return regCounter(t, gw.registry, name, labels...)
}

// startDisaggGateway starts one simulated engine per role and a gateway
// with the P/D profile (nonCachedTokens 256) routing over them, the
// engines' endpoints in eps; stop shuts
// the gateway and the engines down.
func startDisaggGateway(t *testing.T, roles []string) (engines []*pdEngine, eps []kvroute.Endpoint, gw *Server, client *http.Client, stop func()) {
	t.Helper()
	engines = make([]*pdEngine, len(roles))
	eps = make([]kvroute.Endpoint, len(roles))
	for i, role := range roles {
		engines[i] = startPDEngine(t)
		eps[i] = kvroute.Endpoint{ID: engines[i].id, Role: role, EventsAddress: engines[i].srv.KVEventsEndpoint(),
			ReplayAddress: engines[i].srv.ReplayEndpoint()}
	}
	closeEngines := func() {
		for _, e := range engines {
			e.close(t)
		}
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.BlockSize = 16
	cfg.Events.Enabled = new(true)
	gw, err := NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps,
		Disagg: &disagg.Config{NonCachedTokens: 256}}, Options{})
	if err != nil {
		closeEngines()
		require.NoError(t, err)
	}
	client = &http.Client{}
	return engines, eps, gw, client, func() {
		client.CloseIdleConnections()
		require.NoError(t, gw.Shutdown(context.Background()))
		closeEngines()
	}
}
