package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/kvroute/kvroute/simengine"
	"github.com/stretchr/testify/require"
)

// fast engine knobs: a step lasts about a millisecond.
func fastEngine() simengine.Config {
	return simengine.Config{BlockSize: 4, NumGPUBlocks: 512, DecodeStep: time.Millisecond, PrefillTokensPerSecond: 1e6}
}

// recorder is a simengine.EventSink; the engine calls it from one goroutine,
// tests read it after the request that produced the events has finished.
type recorder struct {
	ch chan simengine.EventBatch
}

func newRecorder() *recorder { return &recorder{ch: make(chan simengine.EventBatch, 1024)} }

func (r *recorder) PublishKVEvents(b simengine.EventBatch) { r.ch <- b }

// drain returns the events recorded so far.
func (r *recorder) drain() []simengine.Event {
	var out []simengine.Event
	for {
		select {
		case b := <-r.ch:
			out = append(out, b.Events...)
		default:
			return out
		}
	}
}

func startServer(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	if cfg.Model == "" {
		cfg.Model = "m"
	}
	if cfg.Engine.BlockSize == 0 {
		sink := cfg.Engine.Sink
		cfg.Engine = fastEngine()
		cfg.Engine.Sink = sink
	}
	s, err := New(cfg, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Start("127.0.0.1:0"))
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, "http://" + s.Addr()
}

var testClient = &http.Client{Timeout: 20 * time.Second}

func post(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := testClient.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), string(b))
	return v
}

func chatBody(content string, maxTokens int) map[string]any {
	return map[string]any{"model": "m", "max_tokens": maxTokens,
		"messages": []map[string]any{{"role": "system", "content": "You are a simulated engine."}, {"role": "user", "content": content}}}
}

// The start of a body (no braces) of each request model that runs vLLM's
// own validators (stream_options, priority): a text completion, a
// token-ID completion (decodeCompletion's fast path) and a chat
// completion.
const (
	completionHead = `"model":"m","prompt":"hello there","max_tokens":1`
	tokenIDsHead   = `"model":"m","prompt":[5,6,7],"max_tokens":1`
	chatHead       = `"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1`
)

// validatedRoutes are the routes of those request models, generation and
// render, each with its body's start.
var validatedRoutes = []struct{ path, head string }{
	{"/v1/completions", completionHead}, {"/v1/completions/render", completionHead},
	{"/v1/completions", tokenIDsHead}, {"/v1/completions/render", tokenIDsHead},
	{"/v1/chat/completions", chatHead}, {"/v1/chat/completions/render", chatHead},
}
