package kvroute

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
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
// listens (their event sockets refuse at once). The ports lie outside the
// ephemeral range (testport): no other socket's bind to port 0 takes one and
// answers.
func loopbackEndpoints(t *testing.T, n int) []Endpoint {
	t.Helper()
	eps := make([]Endpoint, n)
	for i := range eps {
		eps[i] = Endpoint{ID: testport.Addr(t)}
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
	cfg.Events.Enabled = new(false)
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
