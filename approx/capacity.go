package approx

import (
	"math"
	"time"
)

// Where an endpoint's capacity comes from: the source label of
// kvroute_approx_endpoint_capacity_blocks and EndpointState.CapacitySource.
const (
	// CapacityConfig: Config.Endpoints or SetCapacity name the endpoint;
	// the engine's metrics are not consulted.
	CapacityConfig = "config"
	// CapacityEngine: the engine's own metrics (vLLM's
	// vllm:cache_config_info): its GPU blocks, plus its CPU offload blocks
	// when it reports them.
	CapacityEngine = "engine"
	// CapacityEngineConfigCPU: the engine's GPU blocks, and its CPU offload
	// tier from Config.Capacity.CPUBlocks, because the engine offloads but
	// does not report that tier's size (no vLLM release does).
	CapacityEngineConfigCPU = "engine+config_cpu"
	// CapacityDefault: Config.Capacity (as configured for every endpoint,
	// or DefaultGPUBlocks blocks of DefaultEngineBlockSize tokens): no
	// capacity source, CapacityFrom "config", or a fallback.
	CapacityDefault = "default"
)

// Reasons an endpoint's capacity falls back, the reason label of
// kvroute_approx_capacity_fallbacks_total and EndpointState.CapacityFallback.
const (
	// FallbackMetricsUnavailable: the engine's metrics were never read, or
	// not for longer than Config.TTL (its metrics endpoint is down, or
	// every scrape fails): Config.Capacity applies.
	FallbackMetricsUnavailable = "metrics_unavailable"
	// FallbackUnreported: the engine's metrics are read but hold no cache
	// configuration (not vLLM, or a server that does not export it):
	// Config.Capacity applies.
	FallbackUnreported = "unreported"
	// FallbackInvalid: the engine's cache configuration is there but its
	// block counts are not valid numbers: Config.Capacity applies.
	FallbackInvalid = "invalid"
	// FallbackOffloadUnsized: the engine offloads to CPU memory without
	// reporting how many blocks that holds, and Config.Capacity.CPUBlocks is
	// 0: the index is sized to the engine's GPU blocks only, and forgets
	// prefixes the engine still serves from CPU memory (the mistake of
	// llm-d/llm-d-router#1650). Set capacity.cpuBlocks.
	FallbackOffloadUnsized = "offload_unsized"
)

var fallbackNames = []string{FallbackMetricsUnavailable, FallbackUnreported, FallbackInvalid, FallbackOffloadUnsized}

// EngineCapacity is one engine's capacity as a CapacitySource last read it
// from the engine.
type EngineCapacity struct {
	// Capacity is what the engine reported: its GPU blocks (0 when it
	// reported none), its CPU offload blocks when it reports that tier's
	// size, and its block size.
	Capacity Capacity
	// Read is when the engine's metrics were last read successfully; zero
	// when never.
	Read time.Time
	// Invalid: the engine exposes its cache configuration, with values
	// that are not valid block counts.
	Invalid bool
	// Offloading: the engine offloads KV blocks to CPU memory. With
	// Capacity.CPUBlocks 0 it did not say how many.
	Offloading bool
	// Pending: the source has not finished reading the engine's metrics
	// yet (it was just added). Config.Capacity applies meanwhile, not
	// counted as a fallback.
	Pending bool
	// Failure is why the last read failed (the scraper's reason:
	// connection, timeout, http_status, ...), empty when it succeeded;
	// shown with a fallback.
	Failure string
}

// CapacitySource reads engines' capacities from the engines themselves
// (package enginemetrics' scraper, adapted by the gateway). EngineCapacity
// must be cheap and must not block: the index calls it for every known
// endpoint at each mode refresh, on the pick path.
type CapacitySource interface {
	EngineCapacity(endpoint string) EngineCapacity
}

// resolvedCapacity is an endpoint's capacity as the last refresh decided.
type resolvedCapacity struct {
	c        Capacity
	source   string
	fallback string // "" when none
	failure  string // EngineCapacity.Failure
}

// resolveCapacity decides an endpoint's capacity at now: an explicit one
// (Config.Endpoints, SetCapacity) first; then the engine's own, when a
// source is given, CapacityFrom is not "config", and the engine reported
// it within Config.TTL (a capacity read before the metrics endpoint went
// down is kept that long: every entry sized by it has expired by then);
// Config.Capacity otherwise, with the reason.
func (x *Index) resolveCapacity(id string, now time.Time) resolvedCapacity {
	x.mu.RLock()
	c, explicit := x.caps[id]
	x.mu.RUnlock()
	if explicit {
		return resolvedCapacity{c: c, source: CapacityConfig}
	}
	def := resolvedCapacity{c: x.cfg.Capacity, source: CapacityDefault}
	if x.src == nil || x.cfg.CapacityFrom == CapacityFromConfig {
		return def
	}
	ec := x.src.EngineCapacity(id)
	def.failure = ec.Failure
	switch {
	case ec.Pending && ec.Read.IsZero():
		return def
	case ec.Read.IsZero() || now.Sub(ec.Read) > x.cfg.TTL:
		def.fallback = FallbackMetricsUnavailable
		return def
	case ec.Invalid:
		def.fallback = FallbackInvalid
		return def
	case ec.Capacity.GPUBlocks <= 0 || ec.Capacity.validate("engine") != nil:
		def.fallback = FallbackUnreported
		return def
	}
	r := resolvedCapacity{c: ec.Capacity, source: CapacityEngine, failure: ec.Failure}
	if r.c.BlockSize <= 0 {
		r.c.BlockSize = DefaultEngineBlockSize
	}
	if ec.Offloading && r.c.CPUBlocks == 0 {
		if cpu := x.cfg.Capacity; cpu.CPUBlocks > 0 {
			// The configured CPU tier, converted to the engine's block size.
			bs := cpu.BlockSize
			if bs <= 0 {
				bs = DefaultEngineBlockSize
			}
			r.c.CPUBlocks = int(min(max(1, int64(cpu.CPUBlocks)*int64(bs)/int64(r.c.BlockSize)), math.MaxInt))
			r.source = CapacityEngineConfigCPU
		} else {
			r.fallback = FallbackOffloadUnsized
		}
	}
	return r
}

// refreshCapacities resolves every known endpoint's capacity; a capacity
// that newly falls back (or falls back for another reason) is counted and
// logged once, not at every refresh. Two refreshes (a pick's and the
// periodic one) run one after the other: a slower one that resolved before
// the other must not swap its older result in after it, which made the next
// refresh count the same fallback again.
func (x *Index) refreshCapacities(ids []string, now time.Time) {
	if !x.cfg.Enabled {
		return
	}
	x.refreshMu.Lock()
	defer x.refreshMu.Unlock()
	next := make(map[string]resolvedCapacity, len(ids))
	for _, id := range ids {
		next[id] = x.resolveCapacity(id, now)
	}
	x.mu.Lock()
	prev := x.resolved
	x.resolved = next
	x.mu.Unlock()
	for _, id := range ids {
		r := next[id]
		if r.fallback == "" || prev[id].fallback == r.fallback {
			continue
		}
		x.met.fallbacks[r.fallback].Inc()
		x.log.Warn("approximate index: endpoint capacity falls back", "endpoint", id, "reason", r.fallback,
			"source", r.source, "failure", r.failure, "gpuBlocks", r.c.GPUBlocks, "cpuBlocks", r.c.CPUBlocks, "blockSize", r.c.BlockSize)
	}
}
