package enginemetrics

import (
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// vLLM's cache configuration gauges. vllm:cache_config_info is an info
// gauge (always 1) whose labels are every field of the engine's
// CacheConfig, rendered by Python's str (an unset field reads "None"),
// plus engine, one series per data-parallel engine. The labels read here:
//
//	block_size             tokens per KV block (--block-size), at least 1
//	num_gpu_blocks         KV blocks in GPU memory, set once the cache is sized
//	kv_cache_size_tokens   the group-aware capacity in tokens (newer vLLM;
//	                       num_gpu_blocks × block_size is wrong for hybrid models)
//	kv_offloading_size     the CPU offloading buffer in GiB (--kv-offloading-size), "None" without offloading
//	kv_offloading_backend  native or lmcache
//
// num_cpu_blocks is not read: in vLLM v1 it is 0, and in v0 it was the
// swap space of preempted requests, never a prefix-cache tier. No vLLM
// release exports the CPU tier's size in blocks (kv_offloading_size is
// bytes, and one block's bytes depend on the model); a proposed gauge,
// vllm:kv_offload_config_info with cpu_num_chunks and cpu_blocks_per_chunk,
// is read when present.
const (
	metricCacheConfig   = "vllm:cache_config_info"
	metricOffloadConfig = "vllm:kv_offload_config_info"

	labelBlockSize       = "block_size"
	labelNumGPUBlocks    = "num_gpu_blocks"
	labelKVCacheTokens   = "kv_cache_size_tokens"
	labelOffloadingSize  = "kv_offloading_size"
	labelOffloadBackend  = "kv_offloading_backend"
	labelCPUNumChunks    = "cpu_num_chunks"
	labelCPUBlocksPerChk = "cpu_blocks_per_chunk"

	// maxCacheBlocks bounds the block counts read (larger values are not a
	// cache any engine has, and their products must not overflow).
	maxCacheBlocks = 1 << 31
	// maxBlockSize bounds block_size (at least 1).
	maxBlockSize = 1 << 20
	// maxOffloadGiB bounds kv_offloading_size (an exabyte of host memory).
	maxOffloadGiB = 1 << 30
	// maxBackendBytes bounds the backend name kept.
	maxBackendBytes = 32
)

// CacheInfo is an engine's KV-cache capacity as its vllm:cache_config_info
// (and, when present, vllm:kv_offload_config_info) reported it.
type CacheInfo struct {
	// Reported is true when the engine exposes vllm:cache_config_info with a
	// valid block_size and num_gpu_blocks (or kv_cache_size_tokens); the
	// other fields are zero otherwise.
	Reported bool
	// Invalid is true when the gauge is there but its block counts are not
	// integers in range, block_size 0 included (Reported is then false).
	Invalid bool
	// BlockSize is the engine's block size in tokens (block_size).
	BlockSize int
	// GPUBlocks is the engine's KV blocks in GPU memory: kv_cache_size_tokens
	// divided by block_size when the engine reports that group-aware
	// capacity, num_gpu_blocks otherwise.
	GPUBlocks int
	// CPUBlocks is the blocks (of BlockSize tokens) of the engine's CPU
	// offload tier when the engine reports its size; 0 otherwise.
	CPUBlocks int
	// Offloading is true when the engine offloads KV blocks to CPU memory
	// (kv_offloading_size is set, or the offload gauge reports a size).
	Offloading bool
	// OffloadingGiB is kv_offloading_size: the CPU offloading buffer in
	// GiB; 0 without offloading.
	OffloadingGiB float64
	// OffloadBackend is kv_offloading_backend ("native", "lmcache"), when
	// Offloading; empty otherwise or when the value is not a short word.
	OffloadBackend string
}

// parseCache reads the cache configuration gauges: the series of engine
// (the endpoint's rank) when one carries it, otherwise every series summed
// (a server whose data-parallel engines share one URL holds all their
// caches). A missing gauge is not an error: the engine does not report its
// capacity.
func parseCache(mfs map[string]*dto.MetricFamily, engine string) CacheInfo {
	ms := infoSeries(mfs[metricCacheConfig], engine)
	if len(ms) == 0 {
		return CacheInfo{}
	}
	var info CacheInfo
	for _, m := range ms {
		bs, ok1 := intLabel(m, labelBlockSize, maxBlockSize)
		ok1 = ok1 && bs >= 1 // a block of no tokens is no cache, and kv_cache_size_tokens is divided by it
		gpu, ok2 := intLabel(m, labelNumGPUBlocks, maxCacheBlocks)
		if tokens, ok := intLabel(m, labelKVCacheTokens, maxCacheBlocks*maxBlockSize); ok && ok1 && tokens >= bs {
			gpu, ok2 = tokens/bs, true
		}
		if !ok1 || !ok2 || gpu == 0 || (info.BlockSize != 0 && bs != info.BlockSize) {
			return CacheInfo{Invalid: true}
		}
		info.BlockSize = bs
		info.GPUBlocks = min(info.GPUBlocks+gpu, maxCacheBlocks)
		if v := labelValue(m, labelOffloadingSize); v != "" && v != "None" {
			if gib, err := strconv.ParseFloat(v, 64); err == nil && gib > 0 && gib <= maxOffloadGiB {
				info.Offloading = true
				info.OffloadingGiB += gib
				if b := labelValue(m, labelOffloadBackend); isWord(b) {
					info.OffloadBackend = b
				}
			}
		}
	}
	info.Reported = true
	for _, m := range infoSeries(mfs[metricOffloadConfig], engine) {
		chunks, ok1 := intLabel(m, labelCPUNumChunks, maxCacheBlocks)
		per, ok2 := intLabel(m, labelCPUBlocksPerChk, maxCacheBlocks)
		if ok1 && ok2 && chunks > 0 && per > 0 {
			info.CPUBlocks = int(min(int64(info.CPUBlocks)+int64(chunks)*int64(per), maxCacheBlocks))
			info.Offloading = true
		}
	}
	return info
}

// infoSeries selects an info gauge's series for engine (see parseCache).
func infoSeries(mf *dto.MetricFamily, engine string) []*dto.Metric {
	if mf == nil {
		return nil
	}
	if t := mf.GetType(); t != dto.MetricType_GAUGE && t != dto.MetricType_UNTYPED {
		return nil
	}
	ms := mf.GetMetric()
	for _, m := range ms {
		if labelValue(m, engineLabel) == engine {
			return []*dto.Metric{m}
		}
	}
	return ms
}

// intLabel reads a label as an integer in [0, limit]; false when it is
// absent, "None" or anything else.
func intLabel(m *dto.Metric, name string, limit int) (int, bool) {
	v := strings.TrimSpace(labelValue(m, name))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > int64(limit) {
		return 0, false
	}
	return int(n), true
}

// isWord reports whether s is a short name of letters, digits, '_' and
// '-', safe to show.
func isWord(s string) bool {
	if s == "" || len(s) > maxBackendBytes {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
