package enginemetrics

import (
	"testing"

	"github.com/kvroute/kvroute"

	"github.com/stretchr/testify/require"
)

// cacheSeries is a vLLM v1 vllm:cache_config_info series with the labels
// read here among others vLLM writes.
func cacheSeries(engine, blockSize, gpuBlocks, tokens, offloadGiB string) string {
	return `vllm:cache_config_info{block_size="` + blockSize + `",cache_dtype="auto",cpu_offload_gb="0",enable_prefix_caching="True",` +
		`engine="` + engine + `",gpu_memory_utilization="0.9",kv_cache_size_tokens="` + tokens + `",kv_offloading_backend="native",` +
		`kv_offloading_size="` + offloadGiB + `",num_cpu_blocks="0",num_gpu_blocks="` + gpuBlocks + `",num_gpu_blocks_override="None"} 1` + "\n"
}

func TestParseCacheConfig(t *testing.T) {
	const head = "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n"
	for _, tc := range []struct {
		name string
		body string
		rank int
		want CacheInfo
	}{
		{name: "no gauge: not reported", body: vllmSample, want: CacheInfo{}},
		{name: "GPU blocks, no offloading", body: vllmSample + head + cacheSeries("0", "16", "31250", "None", "None"),
			want: CacheInfo{Reported: true, BlockSize: 16, GPUBlocks: 31250}},
		{name: "group-aware capacity in tokens wins over num_gpu_blocks", body: vllmSample + head + cacheSeries("0", "16", "1000", "8000", "None"),
			want: CacheInfo{Reported: true, BlockSize: 16, GPUBlocks: 500}},
		{name: "offloading on, its size in blocks not reported", body: vllmSample + head + cacheSeries("0", "16", "1000", "None", "40.0"),
			want: CacheInfo{Reported: true, BlockSize: 16, GPUBlocks: 1000, Offloading: true, OffloadingGiB: 40, OffloadBackend: "native"}},
		{name: "offload tier reported in chunks", body: vllmSample + head + cacheSeries("0", "16", "1000", "None", "40.0") +
			"# TYPE vllm:kv_offload_config_info gauge\nvllm:kv_offload_config_info{engine=\"0\",cpu_num_chunks=\"500\",cpu_blocks_per_chunk=\"4\"} 1\n",
			want: CacheInfo{Reported: true, BlockSize: 16, GPUBlocks: 1000, CPUBlocks: 2000, Offloading: true, OffloadingGiB: 40, OffloadBackend: "native"}},
		{name: "the endpoint's rank among data-parallel engines", rank: 1,
			body: dpSample + head + cacheSeries("0", "16", "1000", "None", "None") + cacheSeries("1", "16", "3000", "None", "None"),
			want: CacheInfo{Reported: true, BlockSize: 16, GPUBlocks: 3000}},
		{name: "no series of the rank: the engines summed", rank: 5,
			body: dpSample + head + cacheSeries("0", "16", "1000", "None", "None") + cacheSeries("1", "16", "3000", "None", "None"),
			want: CacheInfo{Reported: true, BlockSize: 16, GPUBlocks: 4000}},
		{name: "not yet sized: num_gpu_blocks None", body: vllmSample + head + cacheSeries("0", "16", "None", "None", "None"),
			want: CacheInfo{Invalid: true}},
		{name: "negative blocks", body: vllmSample + head + cacheSeries("0", "16", "-5", "None", "None"), want: CacheInfo{Invalid: true}},
		{name: "absurd block size", body: vllmSample + head + cacheSeries("0", "99999999", "5", "None", "None"), want: CacheInfo{Invalid: true}},
		{name: "block size 0 with a capacity in tokens", body: vllmSample + head + cacheSeries("0", "0", "1000", "8000", "None"),
			want: CacheInfo{Invalid: true}},
		{name: "block size 0 with GPU blocks", body: vllmSample + head + cacheSeries("0", "0", "1000", "None", "None"),
			want: CacheInfo{Invalid: true}},
		{name: "garbage offloading size: not offloading", body: vllmSample + head + cacheSeries("0", "16", "10", "None", "NaN"),
			want: CacheInfo{Reported: true, BlockSize: 16, GPUBlocks: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig, err := parseSignal([]byte(tc.body), tc.rank)
			require.Nil(t, err)
			require.Equal(t, tc.want, sig.Cache)
		})
	}
}

// An engine at an endpoint's address that reports block_size 0 together
// with kv_cache_size_tokens gives invalid cache info; the scrape goroutine,
// where nothing recovers, once divided by it and crashed the router.
func TestScrapeOfZeroBlockSizeIsInvalidCacheInfo(t *testing.T) {
	const head = "# TYPE vllm:cache_config_info gauge\n"
	srv := serve(t, page(vllmSample+head+cacheSeries("0", "0", "1000", "8000", "None")))
	s, _, _ := newScraper(t, manualConfig())
	ep := endpointOf(srv)
	s.SetEndpoints([]kvroute.Endpoint{ep})
	waitScrapes(t, s, ep, 1)
	sig, fresh := s.Signal(ep)
	require.True(t, fresh, "the rest of the scrape is kept")
	require.Equal(t, CacheInfo{Invalid: true}, sig.Cache)
	require.Equal(t, 7, sig.Waiting)
}
