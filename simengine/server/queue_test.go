package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// stream is one streaming completion held open by a test.
type stream struct {
	cancel  context.CancelFunc
	started chan struct{} // closed at the first data line (the first token)
}

// openStream sends a streaming completion and returns once the server has
// answered with its headers, which it does after submitting to the engine:
// streams opened one after another reach the engine in that order.
func openStream(t *testing.T, base, prompt string, maxTokens int) *stream {
	t.Helper()
	b, err := json.Marshal(map[string]any{"model": "m", "prompt": prompt, "max_tokens": maxTokens, "stream": true})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	s := &stream{cancel: cancel, started: make(chan struct{})}
	go func() {
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		first := true
		for { // read to the end: closing the body would hang up
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if first && strings.HasPrefix(line, "data: ") {
				close(s.started)
				first = false
			}
		}
	}()
	t.Cleanup(cancel)
	return s
}

// scrape reads the server's /metrics with the Prometheus text parser and
// returns each gauge's and counter's value by name (summed over its series;
// series with a reason label under name/reason).
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := testClient.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					key += "/" + l.GetValue()
				}
			}
			switch {
			case m.GetGauge() != nil:
				out[key] += m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// waitMetrics polls /metrics until want holds (a condition on the engine's
// own state, with a generous deadline).
func waitMetrics(t *testing.T, base string, want map[string]float64) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		last := scrape(t, base)
		ok := true
		for k, v := range want {
			ok = ok && last[k] == v
		}
		if ok {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never reached %v; last scrape: %v", want, last)
		}
		time.Sleep(2 * time.Millisecond) // poll interval, not synchronization
	}
}

// waitStarted waits for the stream's first token.
func waitStarted(t *testing.T, s *stream) {
	t.Helper()
	select {
	case <-s.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream never produced its first token")
	}
}

func startedSoFar(ss []*stream) []bool {
	out := make([]bool, len(ss))
	for i, s := range ss {
		select {
		case <-s.started:
			out[i] = true
		default:
		}
	}
	return out
}

// With --max-num-seqs 2, five concurrent requests show as 2 running and 3
// waiting on /metrics, under vLLM's names; a client hanging up while waiting
// takes its request out of the queue, and a finished running request lets the
// oldest waiting one in (FCFS).
func TestMaxNumSeqsQueuesLikeVLLM(t *testing.T) {
	cfg := Config{Engine: fastEngine()}
	cfg.Engine.MaxNumSeqs = 2
	cfg.Engine.NumGPUBlocks = 8192                // room for every request: no preemption
	cfg.Engine.DecodeStep = 10 * time.Millisecond // 3000 tokens: 30 s, longer than the test
	_, base := startServer(t, cfg)
	ss := make([]*stream, 5)
	for i := range ss {
		ss[i] = openStream(t, base, "request number "+strings.Repeat("x ", i+1), 3000)
	}
	m := waitMetrics(t, base, map[string]float64{
		"vllm:num_requests_running": 2, "vllm:num_requests_waiting": 3,
	})
	require.Equal(t, 3.0, m["vllm:num_requests_waiting_by_reason/capacity"])
	require.Equal(t, 0.0, m["vllm:num_requests_waiting_by_reason/deferred"])
	require.Positive(t, m["vllm:kv_cache_usage_perc"])
	waitStarted(t, ss[0])
	waitStarted(t, ss[1])
	require.Equal(t, []bool{true, true, false, false, false}, startedSoFar(ss))

	// Request 3 hangs up while waiting: it leaves the queue, counted as aborted.
	ss[3].cancel()
	waitMetrics(t, base, map[string]float64{
		"vllm:num_requests_running": 2, "vllm:num_requests_waiting": 2, "simengine_requests_aborted_total": 1,
	})

	// Request 0 ends: the oldest waiting request (2, not 4) takes its slot.
	ss[0].cancel()
	waitMetrics(t, base, map[string]float64{
		"vllm:num_requests_running": 2, "vllm:num_requests_waiting": 1, "simengine_requests_aborted_total": 2,
	})
	waitStarted(t, ss[2])
	require.False(t, startedSoFar(ss)[4], "request 4 overtook request 2")
}
