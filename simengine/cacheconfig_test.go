package simengine

import (
	"testing"

	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// The engine exports vllm:cache_config_info as vLLM does: one series set
// to 1, its labels the cache's configuration rendered as Python strings.
func TestCacheConfigInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(Config{Model: "m", BlockSize: 16, NumGPUBlocks: 1000}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer e.Close()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var labels map[string]string
	for _, mf := range mfs {
		if mf.GetName() != "vllm:cache_config_info" {
			continue
		}
		require.Len(t, mf.GetMetric(), 1)
		m := mf.GetMetric()[0]
		require.Equal(t, 1.0, m.GetGauge().GetValue())
		labels = map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
	}
	require.NotNil(t, labels, "vllm:cache_config_info exported")
	require.Equal(t, "16", labels["block_size"])
	require.Equal(t, "1000", labels["num_gpu_blocks"])
	require.Equal(t, "16000", labels["kv_cache_size_tokens"])
	require.Equal(t, "0", labels["num_cpu_blocks"])
	require.Equal(t, "None", labels["kv_offloading_size"])
	require.Equal(t, "0", labels["engine"])
}
