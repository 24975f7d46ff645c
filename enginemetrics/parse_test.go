package enginemetrics

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// vllmSample is the shape of a vLLM 0.1x /metrics page around the gauges
// read here: HELP and TYPE lines, model_name and engine labels, and
// neighbours (counters, histograms) that are skipped.
const vllmSample = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-0.6B"} 7.0
# HELP vllm:num_requests_waiting_by_reason Number of waiting requests by reason.
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="Qwen/Qwen3-0.6B",reason="capacity"} 7.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.4375
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 1234.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="Qwen/Qwen3-0.6B"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-0.6B"} 4.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="Qwen/Qwen3-0.6B"} 4.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.25
`

func TestParseSignal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		rank   int
		want   Signal
		reason string
	}{
		{name: "vLLM", body: vllmSample, want: Signal{Waiting: 7, Running: 3, KVCacheUsage: 0.4375}},
		{name: "untyped, no labels, no trailing newline",
			body: "vllm:num_requests_waiting 1\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.5",
			want: Signal{Waiting: 1, Running: 2, KVCacheUsage: 0.5}},
		{name: "vLLM before 0.9: gpu_cache_usage_perc",
			body: "vllm:num_requests_waiting 1\nvllm:num_requests_running 2\nvllm:gpu_cache_usage_perc 0.25\n",
			want: Signal{Waiting: 1, Running: 2, KVCacheUsage: 0.25}},
		{name: "OpenMetrics 1.0",
			body: "# TYPE vllm:num_requests_waiting gauge\n# UNIT vllm:num_requests_waiting requests\nvllm:num_requests_waiting{engine=\"0\"} 4.0\n" +
				"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} 1.0\n" +
				"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\"} 0.9\n# EOF\n",
			want: Signal{Waiting: 4, Running: 1, KVCacheUsage: 0.9}},
		{name: "data-parallel: the endpoint's rank", rank: 1,
			body: dpSample, want: Signal{Waiting: 5, Running: 6, KVCacheUsage: 0.7}},
		{name: "data-parallel: no series of the rank, combined", rank: 3,
			body: dpSample, want: Signal{Waiting: 6, Running: 8, KVCacheUsage: 0.7}},
		{name: "garbage elsewhere is not read",
			body: "this is {{{ not metrics\n" + vllmSample, want: Signal{Waiting: 7, Running: 3, KVCacheUsage: 0.4375}},
		{name: "missing waiting", body: "vllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.5\n", reason: reasonMissing},
		{name: "missing KV usage", body: "vllm:num_requests_waiting 1\nvllm:num_requests_running 2\n", reason: reasonMissing},
		{name: "empty", body: "", reason: reasonMissing},
		{name: "HTML", body: "<html><body>vllm:num_requests_waiting</body></html>", reason: reasonMissing},
		{name: "malformed value", body: "vllm:num_requests_waiting one\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.5\n", reason: reasonParse},
		{name: "malformed labels", body: "vllm:num_requests_waiting{engine=0} 1\n", reason: reasonParse},
		{name: "a counter", body: "# TYPE vllm:num_requests_waiting counter\nvllm:num_requests_waiting 1\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.5\n", reason: reasonParse},
		{name: "NaN", body: "vllm:num_requests_waiting NaN\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.5\n", reason: reasonBadValue},
		{name: "negative", body: "vllm:num_requests_waiting 1\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc -0.5\n", reason: reasonBadValue},
		{name: "infinite", body: "vllm:num_requests_waiting +Inf\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.5\n", reason: reasonBadValue},
		{name: "huge queue clamped",
			body: "vllm:num_requests_waiting 1e300\nvllm:num_requests_running 2\nvllm:kv_cache_usage_perc 0.5\n",
			want: Signal{Waiting: maxQueueLength, Running: 2, KVCacheUsage: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSignal([]byte(tc.body), tc.rank)
			if tc.reason != "" {
				require.NotNil(t, err)
				require.Equal(t, tc.reason, err.reason, err.Error())
				return
			}
			require.Nil(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

const dpSample = `vllm:num_requests_waiting{engine="0",model_name="m"} 1
vllm:num_requests_waiting{engine="1",model_name="m"} 5
vllm:num_requests_running{engine="0",model_name="m"} 2
vllm:num_requests_running{engine="1",model_name="m"} 6
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.3
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.7
`

func TestFilterLinesKeepsOnlyTheGauges(t *testing.T) {
	out := string(filterLines([]byte(vllmSample)))
	require.Equal(t, 9, strings.Count(out, "\n"), out)
	require.NotContains(t, out, "prefix_cache")
	require.NotContains(t, out, "by_reason")
	require.NotContains(t, out, "time_to_first_token")
}
