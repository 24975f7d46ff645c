package simengine

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports Stats under vLLM's metric names at scrape time, so the
// scheduler never touches a metric on its hot path and the counters equal
// exactly what the cache did. Labels follow vLLM v1: model_name and engine.
// The scheduler gauges mean what vLLM's do: num_requests_running counts the
// requests in the running queue (at most MaxNumSeqs, prefilling or
// decoding), num_requests_waiting those in the waiting queue (new, or
// preempted back to it), and kv_cache_usage_perc is 1 - free/total blocks,
// where a block held by no running request is free even while it still
// holds a cached prefix and total leaves out the null block with
// Config.NullBlock (vLLM's BlockPool.get_usage: 1 - free/(num_gpu_blocks-1),
// 0 when that is 0).
type collector struct {
	e                                        *Engine
	hits, queries, success, prompt, gen, pre *prometheus.Desc
	running, waiting, usage, rejected        *prometheus.Desc
	aborted, waitingByReason                 *prometheus.Desc
	cacheConfig                              *prometheus.Desc
}

func newCollector(e *Engine) *collector {
	l := []string{"model_name", "engine"}
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append(extra, l...), nil)
	}
	return &collector{
		e:       e,
		hits:    d("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens."),
		queries: d("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens."),
		success: d("vllm:request_success_total", "Count of successfully processed requests.", "finished_reason"),
		prompt:  d("vllm:prompt_tokens_total", "Number of prefill tokens processed."),
		gen:     d("vllm:generation_tokens_total", "Number of generation tokens processed."),
		pre:     d("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine."),
		running: d("vllm:num_requests_running", "Number of requests in model execution batches."),
		waiting: d("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
		waitingByReason: d("vllm:num_requests_waiting_by_reason", "Number of waiting requests by reason. "+
			"Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints "+
			"(LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.", "reason"),
		usage:    d("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
		aborted:  d("simengine_requests_aborted_total", "Requests aborted by the client or by shutdown (not counted as success)."),
		rejected: d("simengine_rejected_requests_total", "Requests the simulated engine rejected as invalid (empty, too long, bad max_tokens)."),
		cacheConfig: prometheus.NewDesc("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
			cacheConfigLabels, nil),
	}
}

// cacheConfigLabels are the labels of vllm:cache_config_info the engine
// exports. vLLM makes one label of every CacheConfig field (its value
// rendered by Python's str, so an unset field reads "None" and a flag
// "True") plus engine; these are the fields a router reads — the block
// size, the GPU blocks, the group-aware capacity in tokens and the CPU
// offloading settings — and a few that identify the cache. num_cpu_blocks
// is 0 as in vLLM v1 (it was v0's swap space, never a prefix-cache tier);
// the simulated engine does not offload to CPU, so kv_offloading_size is
// "None".
var cacheConfigLabels = []string{"block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization",
	"num_gpu_blocks", "num_gpu_blocks_override", "num_cpu_blocks", "kv_cache_size_tokens",
	"kv_offloading_size", "kv_offloading_backend", "engine"}

// cacheConfigValues are the engine's values of cacheConfigLabels.
func (e *Engine) cacheConfigValues() []string {
	blocks := strconv.Itoa(e.cfg.NumGPUBlocks)
	return []string{strconv.Itoa(e.cfg.BlockSize), "auto", "True", "0.9", blocks, blocks, "0",
		strconv.Itoa(e.cfg.NumGPUBlocks * e.cfg.BlockSize), "None", "native", "0"}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hits, c.queries, c.success, c.prompt, c.gen, c.pre,
		c.running, c.waiting, c.waitingByReason, c.usage, c.rejected, c.aborted, c.cacheConfig} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.e.Stats()
	model := c.e.cfg.Model
	emit := func(d *prometheus.Desc, t prometheus.ValueType, v float64, lv ...string) {
		if m, err := prometheus.NewConstMetric(d, t, v, append(lv, model, "0")...); err == nil {
			ch <- m
		}
	}
	emit(c.hits, prometheus.CounterValue, float64(s.PrefixCacheHits))
	emit(c.queries, prometheus.CounterValue, float64(s.PrefixCacheQueries))
	emit(c.success, prometheus.CounterValue, float64(s.RequestSuccess), FinishLength)
	// vLLM creates a series for every FinishReason up front; the engine
	// never stops early, errs or cuts a repetition, and counts its aborts
	// in simengine_requests_aborted_total.
	for _, r := range []string{"stop", FinishAbort, "error", "repetition"} {
		emit(c.success, prometheus.CounterValue, 0, r)
	}
	emit(c.aborted, prometheus.CounterValue, float64(s.RequestAborted))
	emit(c.prompt, prometheus.CounterValue, float64(s.PromptTokens))
	emit(c.gen, prometheus.CounterValue, float64(s.GenerationTokens))
	emit(c.pre, prometheus.CounterValue, float64(s.Preemptions))
	emit(c.running, prometheus.GaugeValue, float64(s.Running))
	emit(c.waiting, prometheus.GaugeValue, float64(s.Waiting+s.Deferred))
	// A request in the scheduler's waiting queue waits for capacity (a
	// running slot under MaxNumSeqs, token budget or KV blocks); deferred
	// are those waiting for their KV transfer (pd.go) and, with
	// Config.LoRA, those the last admission pass skipped because their
	// adapter found no slot, which vLLM keeps in its skipped_waiting queue
	// (lora.go).
	lora := c.e.loraDeferred(s.Waiting)
	emit(c.waitingByReason, prometheus.GaugeValue, float64(s.Waiting-lora), "capacity")
	emit(c.waitingByReason, prometheus.GaugeValue, float64(s.Deferred+lora), "deferred")
	emit(c.usage, prometheus.GaugeValue, c.e.usage(s))
	emit(c.rejected, prometheus.CounterValue, float64(s.RequestRejected))
	// An info gauge, set to 1 once the cache is sized, as vLLM's is.
	if m, err := prometheus.NewConstMetric(c.cacheConfig, prometheus.GaugeValue, 1, c.e.cacheConfigValues()...); err == nil {
		ch <- m
	}
}

// usage is vllm:kv_cache_usage_perc for s: the fraction of the usable
// blocks a running request holds (BlockPool.get_usage).
func (e *Engine) usage(s Stats) float64 {
	total := e.pool.usable
	if total == 0 {
		return 0
	}
	return 1 - float64(s.FreeBlocks)/float64(total)
}
