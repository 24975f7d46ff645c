package simengine

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// loraEngine is a virtual engine with LoRA slots and a fixed step cost.
func loraEngine(t *testing.T, maxLoRAs int, reg prometheus.Registerer) *Engine {
	t.Helper()
	e, err := New(Config{Model: "m", BlockSize: 4, PrefillTokensPerSecond: 1e9, DecodeStep: 10 * time.Millisecond,
		LoRA: &LoRAConfig{MaxLoRAs: maxLoRAs, LoadTime: 100 * time.Millisecond}}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

func submitLoRA(t *testing.T, e *Engine, lora string, first int, out *Result) {
	t.Helper()
	_, err := e.Submit(Request{Prompt: seqTokens(first, 9), MaxTokens: 3, LoRAName: lora, OnDone: func(r Result) { *out = r }})
	require.NoError(t, err)
}

// A request whose adapter is in no slot pays the load time in its first
// step; the next request of the same adapter does not.
func TestLoRALoadStallsTheStep(t *testing.T) {
	e := loraEngine(t, 1, nil)
	var a1, a2 Result
	submitLoRA(t, e, "a", 1, &a1)
	e.RunUntilIdle()
	submitLoRA(t, e, "a", 100, &a2)
	e.RunUntilIdle()
	require.InDelta(t, 110*time.Millisecond, a1.TTFT(), float64(time.Microsecond), "one step plus the load")
	require.InDelta(t, 10*time.Millisecond, a2.TTFT(), float64(time.Microsecond), "loaded: one step")
	require.Equal(t, uint64(1), e.Stats().LoRALoads)
	require.Equal(t, []string{"a"}, e.LoadedLoRAs())
}

// With one slot, a request of another adapter waits while the batch uses
// the first; a later request of the running adapter is skipped ahead of it,
// as vLLM's scheduler skips a request that would exceed max_loras.
func TestLoRACapSkipsAndEvictsLRU(t *testing.T) {
	e := loraEngine(t, 1, nil)
	var a1, b1, a2 Result
	submitLoRA(t, e, "a", 1, &a1)
	submitLoRA(t, e, "b", 100, &b1)
	submitLoRA(t, e, "a", 200, &a2)
	e.RunUntilIdle()
	require.Equal(t, a1.FirstToken, a2.FirstToken, "the second a request joins the first's batch")
	require.True(t, b1.FirstToken.After(a1.Finish) && b1.FirstToken.After(a2.Finish),
		"b waits until a's requests leave the batch: b first token %v, a finished %v", b1.FirstToken, a1.Finish)
	st := e.Stats()
	require.Equal(t, uint64(2), st.LoRALoads)
	require.Equal(t, uint64(1), st.LoRAEvictions, "a left its slot for b")
	require.Equal(t, []string{"b"}, e.LoadedLoRAs())
}

// With two slots, loading a third adapter evicts the least recently used.
func TestLoRALRU(t *testing.T) {
	e := loraEngine(t, 2, nil)
	var r Result
	for i, a := range []string{"a", "b", "a", "c"} {
		submitLoRA(t, e, a, 1+i*100, &r)
		e.RunUntilIdle()
	}
	require.Equal(t, []string{"a", "c"}, e.LoadedLoRAs(), "b was the least recently used")
	require.Equal(t, uint64(3), e.Stats().LoRALoads)
	require.Equal(t, uint64(1), e.Stats().LoRAEvictions)
}

// The engine exposes vllm:lora_requests_info as vLLM does: a series per
// label combination, valued at the time it was set, the newest the
// largest.
func TestLoRARequestsInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := loraEngine(t, 2, reg)
	var r Result
	submitLoRA(t, e, "b", 1, &r)
	submitLoRA(t, e, "a", 100, &r)
	e.RunUntilIdle()
	submitLoRA(t, e, "c", 200, &r)
	e.RunUntilIdle()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var series []map[string]string
	var values []float64
	for _, mf := range mfs {
		if mf.GetName() != "vllm:lora_requests_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			series = append(series, l)
			values = append(values, m.GetGauge().GetValue())
		}
	}
	require.Len(t, series, 3)
	order := []int{0, 1, 2} // oldest first
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(values[a], values[b]) })
	require.Equal(t, map[string]string{"max_lora": "2", "running_lora_adapters": "a,b", "waiting_lora_adapters": ""}, series[order[0]])
	require.Equal(t, map[string]string{"max_lora": "2", "running_lora_adapters": "c", "waiting_lora_adapters": ""}, series[order[1]])
	require.Equal(t, map[string]string{"max_lora": "2", "running_lora_adapters": "", "waiting_lora_adapters": ""}, series[order[2]],
		"idle: the step that finished c names no adapter")
	require.GreaterOrEqual(t, values[order[0]], float64(DefaultStart.Unix()), "engine time, in Unix seconds")
}

func TestLoRAConfig(t *testing.T) {
	_, err := New(Config{LoRA: &LoRAConfig{MaxLoRAs: -1}}, Options{})
	require.ErrorIs(t, err, ErrBadConfig)
	e, err := New(Config{LoRA: &LoRAConfig{}}, Options{})
	require.NoError(t, err)
	defer e.Close()
	require.Equal(t, LoRAConfig{MaxLoRAs: DefaultMaxLoRAs, LoadTime: DefaultLoRALoadTime}, *e.Config().LoRA)
}

// When its last request finishes the engine reports an iteration with no
// adapter running or waiting, as vLLM's output processor does after the
// step that finished it: the newest vllm:lora_requests_info series of an
// idle engine names no adapter, so a router reading the newest series (as
// llm-d's does) does not see the adapter as still running.
func TestLoRARequestsInfoIdleAfterLastRequest(t *testing.T) {
	e := loraEngine(t, 1, nil)
	var r Result
	submitLoRA(t, e, "a", 1, &r)
	end := e.RunUntilIdle()
	series := e.LoRASeries()
	require.NotEmpty(t, series)
	newest := series[len(series)-1]
	require.Equal(t, LoRASeries{Running: "", Waiting: "", MaxLoRA: "1", Value: float64(r.Finish.UnixNano()) / 1e9}, newest,
		"the iteration that finished the last request (at %v)", end)
	require.Equal(t, "a", series[len(series)-2].Running, "the steps that ran it")
}

// waitingByReason reads vllm:num_requests_waiting_by_reason by reason and
// vllm:num_requests_waiting.
func waitingByReason(t *testing.T, reg *prometheus.Registry) (capacity, deferred, waiting float64) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "vllm:num_requests_waiting":
				waiting = m.GetGauge().GetValue()
			case "vllm:num_requests_waiting_by_reason":
				for _, l := range m.GetLabel() {
					switch {
					case l.GetName() == "reason" && l.GetValue() == "capacity":
						capacity = m.GetGauge().GetValue()
					case l.GetName() == "reason" && l.GetValue() == "deferred":
						deferred = m.GetGauge().GetValue()
					}
				}
			}
		}
	}
	return capacity, deferred, waiting
}

// A waiting request the scheduler skips because its adapter finds no slot
// is reported under vllm:num_requests_waiting_by_reason{reason="deferred"},
// as vLLM reports its skipped_waiting queue (LoRA budget among the
// "transient constraints" of the metric's help), not as waiting for
// capacity; the total is unchanged. The engine reported it as capacity.
func TestLoRASkippedRequestIsDeferredWaiting(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := loraEngine(t, 1, reg)
	var a1, b1, a2 Result
	submitLoRA(t, e, "a", 1, &a1)
	submitLoRA(t, e, "b", 100, &b1)
	submitLoRA(t, e, "a", 200, &a2)
	e.AdvanceTo(e.Now()) // the first step: both a requests run, b is skipped
	require.Equal(t, 1, e.Stats().Waiting)
	capacity, deferred, waiting := waitingByReason(t, reg)
	require.Equal(t, 1.0, waiting)
	require.Equal(t, 1.0, deferred, "b waits for a slot")
	require.Equal(t, 0.0, capacity)
	e.RunUntilIdle()
	capacity, deferred, waiting = waitingByReason(t, reg)
	require.Zero(t, waiting+deferred+capacity)
}
