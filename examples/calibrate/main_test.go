package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// fakeEngine is an OpenAI-compatible streaming completions endpoint that
// sends its headers and a keep-alive comment at once, "prefills" for delay,
// and then streams one chunk and [DONE]. It checks every request the way
// vLLM would see it.
type fakeEngine struct {
	t       *testing.T
	chunk   int
	delay   time.Duration
	mu      sync.Mutex
	prompts map[string]bool
	count   int
}

func (e *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model     string   `json:"model"`
		Prompt    []uint32 `json:"prompt"`
		MaxTokens int      `json:"max_tokens"`
		Stream    bool     `json:"stream"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/completions" || dec.Decode(&req) != nil ||
		req.Model != "Qwen/Qwen3-32B" || req.MaxTokens != 1 || !req.Stream || len(req.Prompt) != e.chunk {
		e.t.Errorf("unexpected request %s %s %+v", r.Method, r.URL.Path, req)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	for _, id := range req.Prompt {
		if id < 1000 || id >= 30000 {
			e.t.Errorf("token ID %d outside [1000, 30000)", id)
		}
	}
	e.mu.Lock()
	e.prompts[fmt.Sprint(req.Prompt)] = true
	e.count++
	e.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, ": keep-alive\n\n")
	w.(http.Flusher).Flush()
	select {
	case <-time.After(e.delay): // simulated prefill
	case <-r.Context().Done():
		return
	}
	fmt.Fprint(w, "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n")
	w.(http.Flusher).Flush()
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func TestCalibrateMeasuresTimeToFirstChunk(t *testing.T) {
	defer leakcheck.Check(t)()
	engine := &fakeEngine{t: t, chunk: 512, delay: 20 * time.Millisecond, prompts: map[string]bool{}}
	srv := httptest.NewServer(engine)
	defer srv.Close()

	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{
		"--url", srv.URL, "--model", "Qwen/Qwen3-32B", "--chunk-size", "512", "--warmup", "2", "--measurements", "10",
	}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())

	out := stdout.String()
	require.True(t, strings.HasPrefix(out, "PEAK_PREFILL_THROUGHPUT=") && strings.HasSuffix(out, "\n"), out)
	peak, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(out, "PEAK_PREFILL_THROUGHPUT=")), 64)
	require.NoError(t, err)
	// 512 tokens in at least 20 ms: at most 25,600 tokens/s. The lower bound
	// is loose (a TTFT of up to 2 s on a busy test machine).
	require.LessOrEqual(t, peak, 512/0.020)
	require.GreaterOrEqual(t, peak, 512/2.0)

	require.Equal(t, 12, engine.count, "2 warm-up + 10 measured requests")
	require.Len(t, engine.prompts, 12, "every prompt is fresh random tokens")
	require.Equal(t, 2, strings.Count(stderr.String(), "warm-up "), stderr.String())
	require.Equal(t, 10, strings.Count(stderr.String(), "measurement "), stderr.String())
}

// steppingClock advances by step on every reading, so each request's TTFT
// (two readings) is exactly step.
type steppingClock struct {
	t    time.Time
	step time.Duration
}

func (c *steppingClock) now() time.Time { c.t = c.t.Add(c.step); return c.t }

func Example() {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer engine.Close()

	clock := &steppingClock{step: 514314 * time.Microsecond} // 8,192 tokens prefilled in ~514 ms
	p := &prober{client: engine.Client(), endpoint: engine.URL + "/v1/completions", model: "Qwen/Qwen3-32B",
		timeout: time.Minute, now: clock.now}
	cfg := config{chunk: 8192, warmup: 5, measurements: 20, minTokenID: 1000, maxTokenID: 30000}
	peak, err := calibrate(context.Background(), p, cfg, newRand(), discard{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("PEAK_PREFILL_THROUGHPUT=%s\n", formatThroughput(peak))
	// Output: PEAK_PREFILL_THROUGHPUT=15928
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func TestProbeErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		handler http.HandlerFunc
		want    string
	}{
		"status": {func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, `{"error":"model not found"}`, http.StatusNotFound)
		}, "HTTP 404"},
		"done before any chunk": {func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "data: [DONE]\n\n")
		}, "before the first completion chunk"},
		"error event": {func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "data: {\"error\":{\"message\":\"prompt too long\"}}\n\n")
		}, "prompt too long"},
		"not a stream": {func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{"choices":[{"text":"a"}]}`)
		}, "without a data event"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"--url", srv.URL, "--model", "m", "--chunk-size", "16"}, &stdout, &stderr)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "warm-up 1/5")
			require.Empty(t, stdout.String())
		})
	}
}

func TestProbeTimeout(t *testing.T) {
	defer leakcheck.Check(t)()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		select { // never sends a chunk before the client gives up
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	err := run(context.Background(), []string{"--url", srv.URL, "--model", "m", "--chunk-size", "16", "--warmup", "0",
		"--timeout", "50ms"}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "measurement 1/20")
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--url", "http://10.0.0.1:8000", "--model", "m"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, config{endpoint: "http://10.0.0.1:8000/v1/completions", model: "m", chunk: 8192, warmup: 5,
		measurements: 20, timeout: 2 * time.Minute, minTokenID: 1000, maxTokenID: 30000}, cfg)

	for _, args := range [][]string{
		{"--model", "m"},
		{"--url", "http://h:1"},
		{"--url", "10.0.0.1:8000", "--model", "m"},
		{"--url", "ftp://h/", "--model", "m"},
		{"--url", "http://h:1", "--model", "m", "--chunk-size", "0"},
		{"--url", "http://h:1", "--model", "m", "--warmup", "-1"},
		{"--url", "http://h:1", "--model", "m", "--measurements", "9"},
		{"--url", "http://h:1", "--model", "m", "--timeout", "0s"},
		{"--url", "http://h:1", "--model", "m", "--min-token-id", "5", "--max-token-id", "5"},
		{"--url", "http://h:1", "--model", "m", "--max-token-id", "99999999999"},
		{"--url", "http://h:1", "--model", "m", "extra"},
		{"--bogus"},
	} {
		_, err := parseFlags(args, &bytes.Buffer{})
		require.Error(t, err, "%q", args)
	}
	_, err = parseFlags([]string{"--help"}, &bytes.Buffer{})
	require.ErrorIs(t, err, flag.ErrHelp)
}

func TestCompletionsURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://10.0.0.1:8000":                    "http://10.0.0.1:8000/v1/completions",
		"http://10.0.0.1:8000/":                   "http://10.0.0.1:8000/v1/completions",
		"https://gw.example/v1/completions":       "https://gw.example/v1/completions",
		"http://gw.example/route/qwen":            "http://gw.example/route/qwen/v1/completions",
		"http://gw.example/route/v1/completions/": "http://gw.example/route/v1/completions",
	} {
		got, err := completionsURL(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
}

func TestFormatThroughput(t *testing.T) {
	require.Equal(t, "15928", formatThroughput(15927.6))
	require.Equal(t, "1970", formatThroughput(1970.2))
	require.Equal(t, "0.25", formatThroughput(0.25))
}
