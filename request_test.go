package kvroute

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
)

// renderServer is a vLLM render endpoint on a real HTTP server: every body
// renders to the same 640 tokens (10 blocks); calls are counted.
func renderServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	toks := make([]string, 640)
	for i := range toks {
		toks[i] = fmt.Sprint(5000 + i)
	}
	body := `{"request_id":"r","token_ids":[` + strings.Join(toks, ",") + `],"features":null,"sampling_params":{"max_tokens":1},"model":"` + testModel + `","cache_salt":null}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/completions/render" {
			_, _ = w.Write([]byte("[" + body + "]"))
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// loopbackEndpoints returns n endpoint IDs on 127.0.0.1 ports where nothing
// listens (their event sockets refuse at once).
func loopbackEndpoints(t *testing.T, n int) []Endpoint {
	t.Helper()
	eps := make([]Endpoint, n)
	for i := range eps {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		eps[i] = Endpoint{ID: l.Addr().String()}
		require.NoError(t, l.Close())
	}
	return eps
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func TestNewRequiresAModel(t *testing.T) {
	_, err := New(context.Background(), Config{}, Options{})
	require.ErrorIs(t, err, ErrInvalidConfig, "a zero Config")
	require.ErrorContains(t, err, "model is required")
	_, err = New(context.Background(), DefaultConfig(), Options{})
	require.ErrorIs(t, err, ErrInvalidConfig, "DefaultConfig without a model")
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Requests.MaxRequests = -1
	_, err = New(context.Background(), cfg, Options{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "requests.maxRequests")
	cfg.Requests.MaxRequests, cfg.Requests.TTL = 0, -1
	_, err = New(context.Background(), cfg, Options{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "requests.ttl")
}

func TestPickBeforeSetEndpointsIsAnError(t *testing.T) {
	defer leakcheck.Check(t)()
	eps := loopbackEndpoints(t, 2)

	// Events on: nothing is subscribed until SetEndpoints.
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.DisableRender = true
	r, err := New(context.Background(), cfg, Options{})
	require.NoError(t, err)
	req := &Request{Prompts: []render.Prompt{{TokenIDs: prompt(1, 128)}}}
	_, err = r.Pick(context.Background(), req, eps)
	require.ErrorIs(t, err, ErrEndpointsNotSet)
	_, err = r.Match(context.Background(), req, eps)
	require.ErrorIs(t, err, ErrEndpointsNotSet)
	require.NoError(t, r.SetEndpoints(eps))
	d, err := r.Pick(context.Background(), req, eps)
	require.NoError(t, err)
	d.Done(DoneInfo{})
	// An empty list is still a list: the gateway said so explicitly.
	require.NoError(t, r.SetEndpoints(nil))
	d, err = r.Pick(context.Background(), req, eps)
	require.NoError(t, err)
	d.Done(DoneInfo{})
	r.Close()

	// Events off, rendering on the routed endpoints: render has no endpoints.
	srv, calls := renderServer(t)
	defer srv.Close() // before leakcheck runs
	cfg = DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = false
	r, err = New(context.Background(), cfg, Options{})
	require.NoError(t, err)
	defer r.Close()
	body := &Request{API: render.APICompletions, Body: []byte(`{"model":"test-model","prompt":"hi"}`)}
	_, err = r.Pick(context.Background(), body, []Endpoint{{ID: "render", Address: srv.URL}})
	require.ErrorIs(t, err, ErrEndpointsNotSet)
	require.NoError(t, r.SetEndpoints([]Endpoint{{ID: "render", Address: srv.URL}}))
	d, err = r.Pick(context.Background(), body, []Endpoint{{ID: "render", Address: srv.URL}})
	require.NoError(t, err)
	require.NoError(t, d.RenderErr)
	require.Equal(t, 640, d.PromptTokens)
	require.EqualValues(t, 1, calls.Load())
	d.Done(DoneInfo{})

	// A fixed render URL with events off depends on no endpoint list.
	cfg.Render.URL = srv.URL
	r2, err := New(context.Background(), cfg, Options{})
	require.NoError(t, err)
	defer r2.Close()
	d, err = r2.Pick(context.Background(), body, eps)
	require.NoError(t, err)
	require.Equal(t, 640, d.PromptTokens)
	d.Done(DoneInfo{})
}

func TestPickRequestWithoutAPIIsAnError(t *testing.T) {
	srv, calls := renderServer(t)
	r := testRouter(t, func(c *Config) { c.DisableRender = false; c.Render.URL = srv.URL }, Options{})
	eps := endpoints(2)
	_, err := r.Pick(context.Background(), &Request{Body: []byte(`{"prompt":"hi"}`)}, eps)
	require.ErrorIs(t, err, ErrNoAPI)
	_, err = r.Pick(context.Background(), &Request{API: "embeddings", Body: []byte(`{"input":"hi"}`)}, eps)
	require.ErrorIs(t, err, ErrNoAPI)
	require.ErrorContains(t, err, `"embeddings"`)
	require.Zero(t, calls.Load(), "nothing was sent to the renderer")

	// The API chosen from the path, as a gateway does.
	api, ok := render.APIForPath("/v1/chat/completions")
	require.True(t, ok)
	d, err := r.Pick(context.Background(), &Request{API: api, Body: []byte(`{"model":"test-model","messages":[]}`)}, eps)
	require.NoError(t, err)
	require.NoError(t, d.RenderErr)
	require.Equal(t, 640, d.PromptTokens)
	d.Done(DoneInfo{})
	// Prompts already rendered need no API.
	d, err = r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: prompt(1, 64)}}}, eps)
	require.NoError(t, err)
	d.Done(DoneInfo{})
}

func TestPickRequestModelOtherThanTheRoutersIsAnError(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.DisableRender = true
	r, err := New(context.Background(), cfg, Options{})
	require.NoError(t, err)
	defer r.Close()
	eps := loopbackEndpoints(t, 1)
	require.NoError(t, r.SetEndpoints(eps))
	p := []render.Prompt{{TokenIDs: prompt(1, 128)}}
	_, err = r.Pick(context.Background(), &Request{Model: "served-alias", Prompts: p}, eps)
	require.ErrorIs(t, err, ErrModelMismatch)
	require.ErrorContains(t, err, `"served-alias"`)
	for _, ok := range []*Request{{Model: testModel, Prompts: p}, {LoRA: "adapter-1", Prompts: p}, {Prompts: p}} {
		d, err := r.Pick(context.Background(), ok, eps)
		require.NoError(t, err)
		d.Done(DoneInfo{})
	}
}

// Decisions made without cache information for a reason the router can
// name are counted by reason and warned about once a minute per reason.
func TestCacheBlindDecisionsAreCountedAndWarnedOncePerInterval(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	clock := newFakeClock()
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = false },
		Options{Registerer: reg, Now: clock.Now, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.Equal(t, 1, logs.count("KV events are disabled"), "New warns that events are off")
	eps := endpoints(2)
	blind := func(reason string) float64 {
		v, _ := gathered(t, reg, "kvroute_router_cache_blind_total", reason)
		return v
	}
	for i := 0; i < 3; i++ {
		d, err := r.Pick(context.Background(), &Request{}, eps) // no prompts, render off
		require.NoError(t, err)
		d.Done(DoneInfo{})
		d = pick(t, r, prompt(i, 640), eps) // nothing indexed, events off
		d.Done(DoneInfo{})
	}
	require.Equal(t, 3.0, blind("render_disabled"))
	require.Equal(t, 3.0, blind("events_disabled"))
	require.Zero(t, blind("render_failed"))
	require.Equal(t, 1, logs.count("reason=render_disabled"))
	require.Equal(t, 1, logs.count("reason=events_disabled"))

	// A decision that used the cache is not blind.
	engineStores(t, r.Index(), eps[0].ID, prompt(9, 640), 1)
	d := pick(t, r, prompt(9, 640), eps)
	require.True(t, d.UsedCache)
	d.Done(DoneInfo{})
	require.Equal(t, 3.0, blind("events_disabled"))

	clock.Add(blindWarnInterval)
	d = pick(t, r, prompt(99, 640), eps)
	d.Done(DoneInfo{})
	require.Equal(t, 2, logs.count("reason=events_disabled"), "warned again after the interval")
}

// The render fallback is counted as cache-blind with reason render_failed.
func TestRenderFailureIsCountedCacheBlind(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"message":"The model does not exist.","type":"NotFoundError","param":null,"code":404}}`))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	r := testRouter(t, func(c *Config) { c.DisableRender = false; c.Render.URL = srv.URL }, Options{Registerer: reg})
	d, err := r.Pick(context.Background(), &Request{API: render.APICompletions, Body: []byte(`{"prompt":"x"}`)}, endpoints(2))
	require.NoError(t, err)
	require.Error(t, d.RenderErr)
	d.Done(DoneInfo{})
	v, _ := gathered(t, reg, "kvroute_router_cache_blind_total", "render_failed")
	require.Equal(t, 1.0, v)
}
