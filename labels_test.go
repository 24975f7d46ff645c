package kvroute

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

func TestMetricLabelsReachTheirMetricsOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := testRouter(t, func(c *Config) {
		c.DisableRender = false
		c.Render.URL = "http://127.0.0.1:1"
		c.MetricLabels = MetricLabelsConfig{
			Render:     map[string]string{"plugin_type": "token-producer", "plugin_name": "render", "backend": "vllm"},
			Affinity:   map[string]string{"plugin_name": "affinity"},
			Prediction: map[string]string{"plugin_type": "precise-prefix-cache-producer", "plugin_name": "prefix"},
		}
	}, Options{Set: telemetry.Set{Registerer: reg}})
	d := pick(t, r, prompt(1, 128), endpoints(2))
	d.Done(DoneInfo{})
	r.render.Render(t.Context(), nil) // one observation, so the render series exist
	mfs, err := reg.Gather()
	require.NoError(t, err)
	labels := map[string]map[string]string{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		labels[mf.GetName()] = l
	}
	require.Equal(t, "render", labels["llm_d_epp_token_producer_render_duration_seconds"]["plugin_name"])
	require.Equal(t, "vllm", labels["llm_d_epp_token_producer_render_duration_seconds"]["backend"])
	require.Equal(t, "affinity", labels["llm_d_epp_prefix_cache_affinity_filter_decisions_total"]["plugin_name"])
	require.Equal(t, "precise-prefix-cache-producer", labels["llm_d_epp_prefix_predicted_cached_tokens"]["plugin_type"])
	require.Equal(t, "decode", labels["llm_d_epp_prefix_prompt_tokens"]["endpoint_role"])
	require.NotContains(t, labels["kvroute_router_decisions_total"], "plugin_name")

	for _, bad := range []map[string]string{{"result": "x"}, {"bad-name": "x"}, {"__x": "y"}} {
		cfg := DefaultConfig()
		cfg.Model = testModel
		cfg.MetricLabels.Render = bad
		require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig, "%v", bad)
	}
}
