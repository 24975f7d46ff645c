package e2e

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine"
)

func TestRunFastKeepsTheBurstOnOneWarmEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo")
	}
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// With Hold, every address the demo printed first still answers when it
	// says it keeps running (the gateway restarted in step 4 is back on its
	// port); then ending ctx stops it.
	out := &holdWriter{held: make(chan struct{})}
	type result struct {
		rep *Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := Run(ctx, Options{Fast: true, LoadRequests: 24, Hold: true}, out)
		done <- result{rep, err}
	}()
	select {
	case <-out.held:
	case r := <-done:
		t.Fatalf("Run returned before holding: %v\n%s", r.err, out.String())
	}
	header, _, _ := strings.Cut(out.String(), "1. Deployment verification")
	urls := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindAllString(header, -1)
	require.Len(t, urls, 4, "two engines and two gateways:\n%s", header)
	client := &http.Client{Transport: &http.Transport{}}
	for _, u := range urls {
		resp, err := client.Get(u + "/health")
		require.NoError(t, err, "%s, printed first, is dead at the end:\n%s", u, out.String())
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, u)
		require.Contains(t, out.heldLine(), u, "the --hold message names it")
	}
	client.CloseIdleConnections()
	cancel()
	r := <-done
	rep, err := r.rep, r.err
	require.NoError(t, err, out.String())

	require.Len(t, rep.Engines, 2)
	require.Len(t, rep.Burst.Routed, 1, "every request of the burst went to the same engine:\n%s", out.String())
	require.Equal(t, 10, rep.Burst.Routed[rep.Burst.Top])
	require.Equal(t, 10.0, rep.Burst.Succeeded[rep.Burst.Top], "the engine's own success counter agrees")
	require.GreaterOrEqual(t, rep.Burst.HitRate[rep.Burst.Top], 0.8)
	require.InDelta(t, rep.Burst.HitRate[rep.Burst.Top], rep.Burst.PredictedCachedShare, 0.05,
		"the router predicted what the engine hit")
	require.Positive(t, rep.EventBatches, "KV events reached the router")

	require.Len(t, rep.Comparison, 2)
	for _, r := range rep.Comparison {
		require.Equal(t, 24, r.Requests)
		total := 0
		for _, n := range r.Routed {
			total += n
		}
		require.Equal(t, 24, total, r.Policy)
		require.Positive(t, r.TTFTP50, r.Policy)
	}
	require.Greater(t, rep.Restart.WarmBatches, uint64(16), "the shared prompts are older than the replay buffer")
	require.InDelta(t, rep.Restart.Checkpoint.HitRate, rep.Restart.Checkpoint.PredictedCachedShare, 0.05,
		"after a restart with the checkpoint the router predicts what the engines hit:\n%s", out.String())
	require.Less(t, rep.Restart.Cold.PredictedCachedShare, rep.Restart.Checkpoint.PredictedCachedShare-0.2,
		"without it, it misses the old prompts:\n%s", out.String())
	require.Less(t, rep.Snapshot.ReplayOnly.Coverage(), 0.9, "replay alone leaves the old prefixes out:\n%s", out.String())
	require.InDelta(t, 1.0, rep.Snapshot.Snapshot.Coverage(), 0.01, "the engines' snapshots index their whole caches:\n%s", out.String())
	require.InDelta(t, rep.Snapshot.Snapshot.First.HitRate, rep.Snapshot.Snapshot.First.PredictedCachedShare, 0.05,
		"after a restart from the snapshots the router predicts what the engines hit:\n%s", out.String())
	require.Equal(t, "precise", rep.Comparison[0].Policy)
	require.Equal(t, "round-robin", rep.Comparison[1].Policy)
	for _, want := range []string{"1. Deployment verification", "render check  ok", "POST /v1/messages", "PASS:", "Where to look next"} {
		require.Contains(t, out.String(), want)
	}
}

// holdWriter is Run's output; held is closed once Run says it holds.
type holdWriter struct {
	mu   sync.Mutex
	b    bytes.Buffer
	held chan struct{}
	line string
}

func (h *holdWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.b.Write(p)
	if h.line == "" {
		for l := range strings.Lines(h.b.String()) {
			if strings.Contains(l, "keep running (--hold)") {
				h.line = l
				close(h.held)
			}
		}
	}
	return n, err
}

func (h *holdWriter) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.b.String()
}

func (h *holdWriter) heldLine() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.line
}

func TestRunRejectsBadOptions(t *testing.T) {
	_, err := Run(context.Background(), Options{EngineBlocks: 4}, &bytes.Buffer{})
	require.ErrorContains(t, err, "engineBlocks 4 cannot hold")
	_, err = Run(context.Background(), Options{Engines: -1}, &bytes.Buffer{})
	require.ErrorContains(t, err, "engines must be >= 1")
}

func TestDocumentHasTheRequestedLengthAndDiffersBySeed(t *testing.T) {
	a, b := document(1, 2000), document(2, 2000)
	n := len(simengine.Tokenize(nil, a))
	require.GreaterOrEqual(t, n, 2000)
	require.Less(t, n, 2030)
	require.NotEqual(t, a[:200], b[:200])
	require.Equal(t, a, document(1, 2000), "deterministic")
}

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(`# HELP vllm:prefix_cache_hits_total Hits.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 1984
vllm:request_success_total{finished_reason="length",model_name="m"} 9
vllm:request_success_total{finished_reason="stop",model_name="m"} 1
llm_d_epp_prefix_prompt_tokens_sum{endpoint_role="decode"} 2.5e+03
go_goroutines 12 1700000000000
# TYPE ttft_seconds histogram
ttft_seconds_bucket{le="0.5"} 3
ttft_seconds_bucket{le="+Inf"} 4
ttft_seconds_sum 1.25
ttft_seconds_count 4
`))
	require.NoError(t, err)
	require.Equal(t, 4.0, m.Sum("ttft_seconds_count"))
	require.Equal(t, 1.25, m.Sum("ttft_seconds_sum"))
	require.Equal(t, 3.0, m.Get("ttft_seconds_bucket", "le", "0.5"))
	require.Equal(t, 4.0, m.Get("ttft_seconds_bucket", "le", "+Inf"))
	require.Equal(t, 1984.0, m.Sum("vllm:prefix_cache_hits_total"))
	require.Equal(t, 10.0, m.Sum("vllm:request_success_total"))
	require.Equal(t, 1.0, m.Get("vllm:request_success_total", "finished_reason", "stop"))
	require.Equal(t, 2500.0, m.Get("llm_d_epp_prefix_prompt_tokens_sum", "endpoint_role", "decode"))
	require.Equal(t, 12.0, m.Sum("go_goroutines"))
	require.Zero(t, m.Sum("vllm:prefix_cache_hits"), "names match exactly")
	require.Zero(t, m.Get("vllm:request_success_total", "finished_reason", "sto"), "label values match exactly")

	// A malformed exposition is an error, not a partial scrape.
	_, err = ParseMetrics(strings.NewReader("broken line\n"))
	require.Error(t, err)
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	require.Equal(t, time.Duration(5), percentile(ds, 0.5))
	require.Equal(t, time.Duration(9), percentile(ds, 0.9))
	require.Zero(t, percentile(nil, 0.5))
}
