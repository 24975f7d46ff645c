package simengine

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

type arrival struct {
	at  time.Duration
	req Request
}

// simulate drives a virtual engine through arrivals and returns results by
// submission order.
func simulate(t *testing.T, cfg Config, arrivals []arrival) []Result {
	t.Helper()
	e, err := New(cfg, Options{})
	require.NoError(t, err)
	defer e.Close()
	start := e.Now()
	res := make([]Result, len(arrivals))
	for i, a := range arrivals {
		at := start.Add(a.at)
		for {
			next, ok := e.NextEventTime()
			if !ok || next.After(at) {
				break
			}
			e.AdvanceTo(next)
		}
		e.AdvanceTo(at)
		r := a.req
		r.OnDone = func(x Result) { res[i] = x }
		_, err := e.Submit(r)
		require.NoError(t, err)
	}
	e.RunUntilIdle()
	return res
}

func ttfts(rs []Result) []time.Duration {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = r.TTFT()
	}
	return out
}

func TestVirtualClockDeterministic(t *testing.T) {
	var arrivals []arrival
	prefix := seqTokens(1000, 700)
	for i := range 40 {
		p := append(slices.Clone(prefix[:100+i*13]), seqTokens(5000+i*50, 30+i)...)
		arrivals = append(arrivals, arrival{at: time.Duration(i*i) * time.Millisecond, req: Request{Prompt: p, MaxTokens: 1 + i%7}})
	}
	cfg := Config{BlockSize: 16, NumGPUBlocks: 60, MaxNumBatchedTokens: 256, MaxNumSeqs: 8}
	a, b := simulate(t, cfg, arrivals), simulate(t, cfg, arrivals)
	require.Equal(t, ttfts(a), ttfts(b))
	for i := range a {
		require.NoError(t, a[i].Err)
		require.Equal(t, a[i].OutputTokens, b[i].OutputTokens)
		require.Equal(t, a[i].Finish, b[i].Finish)
		require.Equal(t, a[i].CachedTokens, b[i].CachedTokens)
	}
}

func TestTTFTGrowsWithUncachedTokens(t *testing.T) {
	cfg := Config{PrefillTokensPerSecond: 10_000, DecodeStep: 10 * time.Millisecond}
	var prev time.Duration
	for _, n := range []int{100, 1000, 4000, 12000} {
		r := simulate(t, cfg, []arrival{{req: Request{Prompt: seqTokens(1, n), MaxTokens: 1}}})[0]
		require.Greater(t, r.TTFT(), prev, "%d tokens", n)
		prev = r.TTFT()
	}
	// 4000 uncached tokens at 10k tok/s plus one 10 ms step: 410 ms.
	r := simulate(t, cfg, []arrival{{req: Request{Prompt: seqTokens(1, 4000), MaxTokens: 1}}})[0]
	require.Equal(t, 410*time.Millisecond, r.TTFT())

	// The same prompt on a warm cache: only the uncached tail is computed.
	p := seqTokens(1, 4000)
	rs := simulate(t, cfg, []arrival{{req: Request{Prompt: p, MaxTokens: 1}}, {at: time.Second, req: Request{Prompt: p, MaxTokens: 1}}})
	require.Equal(t, 3968, rs[1].CachedTokens)
	require.Equal(t, 10*time.Millisecond+3200*time.Microsecond, rs[1].TTFT())
}

func TestTTFTGrowsWithQueueing(t *testing.T) {
	cfg := Config{MaxNumBatchedTokens: 2048}
	var arrivals []arrival
	for i := range 4 {
		arrivals = append(arrivals, arrival{req: Request{Prompt: seqTokens(i*10000+1, 3000), MaxTokens: 2}})
	}
	rs := simulate(t, cfg, arrivals)
	for i := 1; i < len(rs); i++ {
		require.Greater(t, rs[i].TTFT(), rs[i-1].TTFT(), "FCFS: later arrivals wait behind earlier prefills")
	}
	// Chunked prefill: the first request needs two full 2048-token steps (the
	// second one also starts the next request's prefill): 2 × (10 ms + 204.8 ms).
	require.Equal(t, 2*(10*time.Millisecond+204800*time.Microsecond), rs[0].TTFT())
}

func TestPreemptionKeepsOutputs(t *testing.T) {
	var arrivals []arrival
	for i := range 3 {
		arrivals = append(arrivals, arrival{req: Request{Prompt: seqTokens(i*100+1, 10), MaxTokens: 30}})
	}
	// 3 requests × 40 tokens need 30 blocks of 4; 16 force preemptions.
	tight := Config{BlockSize: 4, NumGPUBlocks: 16}
	e, err := New(tight, Options{})
	require.NoError(t, err)
	res := make([]Result, len(arrivals))
	for i, a := range arrivals {
		r := a.req
		r.OnDone = func(x Result) { res[i] = x }
		_, err := e.Submit(r)
		require.NoError(t, err)
	}
	e.RunUntilIdle()
	require.Positive(t, e.Stats().Preemptions)
	e.Close()

	roomy := simulate(t, Config{BlockSize: 4, NumGPUBlocks: 100}, arrivals)
	for i := range res {
		require.NoError(t, res[i].Err)
		require.Equal(t, roomy[i].OutputTokens, res[i].OutputTokens, "generated tokens depend only on the prompt")
	}
}

func TestMetricsCountWhatTheCacheDid(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(Config{Model: "m", BlockSize: 4}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	p := seqTokens(1, 10)
	for range 3 {
		run(t, e, Request{Prompt: p, MaxTokens: 2})
	}
	_, err = e.Submit(Request{MaxTokens: 1})
	require.Error(t, err)
	want := `
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 16
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 30
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="abort",model_name="m"} 0
vllm:request_success_total{engine="0",finished_reason="error",model_name="m"} 0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 3
vllm:request_success_total{engine="0",finished_reason="repetition",model_name="m"} 0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0
# HELP simengine_rejected_requests_total Requests the simulated engine rejected as invalid (empty, too long, bad max_tokens).
# TYPE simengine_rejected_requests_total counter
simengine_rejected_requests_total{engine="0",model_name="m"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", "vllm:request_success_total",
		"vllm:num_requests_running", "vllm:num_requests_waiting", "simengine_rejected_requests_total"))

	// Running and waiting gauges while requests are in flight.
	for i := range 3 {
		_, err := e.Submit(Request{Prompt: seqTokens(100*i+50, 9), MaxTokens: 5})
		require.NoError(t, err)
	}
	require.Equal(t, 3, e.Stats().Waiting)
	e.AdvanceTo(e.Now())
	st := e.Stats()
	require.Equal(t, 3, st.Running)
	require.Equal(t, 0, st.Waiting)
	e.Close()
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Zero(t, n, "Close unregisters the collector")
}

func TestRealTimeEngine(t *testing.T) {
	defer leakcheck.Check(t)()
	e, err := NewRealTime(Config{BlockSize: 4, DecodeStep: time.Millisecond, PrefillTokensPerSecond: 1e6}, Options{})
	require.NoError(t, err)
	defer e.Close()
	done := make(chan Result, 2)
	tokens := make(chan TokenEvent, 10)
	_, err = e.Submit(Request{Prompt: seqTokens(1, 9), MaxTokens: 5,
		OnToken: func(ev TokenEvent) { tokens <- ev }, OnDone: func(r Result) { done <- r }})
	require.NoError(t, err)
	var r Result
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("real-time engine did not finish a request")
	}
	require.NoError(t, r.Err)
	require.Len(t, r.OutputTokens, 5)
	require.Len(t, tokens, 5)
	require.Positive(t, r.TTFT())

	// A long request is aborted by Close.
	_, err = e.Submit(Request{Prompt: seqTokens(1, 9), MaxTokens: 8000, OnDone: func(r Result) { done <- r }})
	require.NoError(t, err)
	e.Close()
	select {
	case r = <-done:
		require.ErrorIs(t, r.Err, ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not report the request")
	}
	e.Close() // idempotent
}

// vllm:prompt_tokens_total counts a request's prompt when its first token
// comes out, as vLLM's frontend does (IterationStats counts the prompt on
// the prefilling output): not while its prefill is still chunking through
// steps, and never for a request aborted before its first token.
func TestPromptTokensCountAtTheFirstToken(t *testing.T) {
	e, _ := newTestEngine(t, Config{MaxNumBatchedTokens: 8})
	id, err := e.Submit(Request{Prompt: seqTokens(1, 20), MaxTokens: 2})
	require.NoError(t, err)
	e.AdvanceTo(e.Now()) // the first 8-token chunk is in flight
	require.Zero(t, e.Stats().PromptTokens, "no token generated yet")
	require.True(t, e.Abort(id))
	e.RunUntilIdle()
	st := e.Stats()
	require.Zero(t, st.PromptTokens, "aborted before its first token")
	require.Equal(t, uint64(20), st.PrefixCacheQueries, "the lookup was counted at admission")

	res := run(t, e, Request{Prompt: seqTokens(100, 20), MaxTokens: 2})
	require.NoError(t, res.Err)
	require.Equal(t, uint64(20), e.Stats().PromptTokens)
}

// A running request that preempts itself for lack of blocks ends
// admission for the step, as any preemption does in vLLM (the waiting
// queue is not scheduled when preempted_reqs is non-empty): it waits a
// step instead of being readmitted at once while others run.
func TestSelfPreemptionAdmitsNobodyThatStep(t *testing.T) {
	e, _ := newTestEngine(t, Config{NumGPUBlocks: 3, MaxNumBatchedTokens: 4})
	_, err := e.Submit(Request{Prompt: seqTokens(1, 4), MaxTokens: 6})
	require.NoError(t, err)
	_, err = e.Submit(Request{Prompt: seqTokens(100, 5), MaxTokens: 6})
	require.NoError(t, err)
	e.AdvanceTo(e.Now()) // step 0: a prefills its 4 tokens, the whole budget
	for range 2 {
		// step 1: a decodes, b prefills 3 of its 5 tokens; step 2: b needs a
		// second block, finds none and preempts itself (it is last).
		next, ok := e.NextEventTime()
		require.True(t, ok)
		e.AdvanceTo(next)
	}
	st := e.Stats()
	require.Equal(t, uint64(1), st.Preemptions)
	require.Equal(t, 1, st.Running, "only a runs in the step that preempted b")
	require.Equal(t, 1, st.Waiting, "b waits for the next step")
	e.RunUntilIdle()
	require.Equal(t, uint64(2), e.Stats().RequestSuccess)
}
