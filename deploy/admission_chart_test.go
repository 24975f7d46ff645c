package deploy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/enginemetrics"
)

// TestChartCarriesAdmission turns the chart's admission stage and engine
// metrics on and checks that the ConfigMap holds both files, that
// kvroute-epp is given them at the ConfigMap's mount, and that each file
// loads as kvroute-epp loads it (YAML to JSON, then its package's strict
// loader). Off (the
// default), neither flag nor file is rendered.
func TestChartCarriesAdmission(t *testing.T) {
	pool := map[string]any{"modelServers": map[string]any{"matchLabels": map[string]string{"app": "vllm"}}}
	values, err := yaml.Marshal(map[string]any{
		"inferenceExtension": map[string]any{
			"model": "m",
			"admission": map[string]any{"enabled": true, "config": map[string]any{
				"objectives": []any{
					map[string]any{"name": "interactive", "priority": 1, "queueTimeout": "10s"},
					map[string]any{"name": "batch", "priority": -1},
				},
			}},
			"engineMetrics": map[string]any{"enabled": true, "config": map[string]any{"staleness": "1s"}},
		},
		"inferencePool": pool,
	})
	require.NoError(t, err)
	objs := chartObjects(t, loadSchemas(t), string(values))
	require.Len(t, objs["ConfigMap"], 1)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.UnmarshalStrict(objs["ConfigMap"][0], &cm))
	args := eppArgs(t, objs["Deployment"][0])
	mount := configMount(t, objs["Deployment"][0], cm.Name)
	require.Contains(t, args, "--admission-config="+mount+"/admission.yaml")
	require.Contains(t, args, "--engine-metrics-config="+mount+"/engine-metrics.yaml")

	// kvroute-epp reads either file as YAML: converted to JSON, then strictly.
	aj, err := yaml.YAMLToJSON([]byte(cm.Data["admission.yaml"]))
	require.NoError(t, err)
	acfg, err := admission.LoadConfig(strings.NewReader(string(aj)))
	require.NoError(t, err, cm.Data["admission.yaml"])
	require.Len(t, acfg.Objectives, 2)
	require.Equal(t, -1, acfg.Objectives[1].Priority)
	ej, err := yaml.YAMLToJSON([]byte(cm.Data["engine-metrics.yaml"]))
	require.NoError(t, err)
	_, err = enginemetrics.LoadConfig(strings.NewReader(string(ej)))
	require.NoError(t, err, cm.Data["engine-metrics.yaml"])

	// Off by default.
	values, err = yaml.Marshal(map[string]any{"inferenceExtension": map[string]any{"model": "m"}, "inferencePool": pool})
	require.NoError(t, err)
	objs = chartObjects(t, loadSchemas(t), string(values))
	var off corev1.ConfigMap
	require.NoError(t, yaml.UnmarshalStrict(objs["ConfigMap"][0], &off))
	require.NotContains(t, off.Data, "admission.yaml")
	for _, a := range eppArgs(t, objs["Deployment"][0]) {
		require.False(t, strings.HasPrefix(a, "--admission-config") || strings.HasPrefix(a, "--engine-metrics-config"), a)
	}

	// Engine metrics alone feed nothing: the render fails naming the value.
	values, err = yaml.Marshal(map[string]any{"inferenceExtension": map[string]any{"model": "m",
		"engineMetrics": map[string]any{"enabled": true}}, "inferencePool": pool})
	require.NoError(t, err)
	_, err = renderChart(t, string(values))
	require.ErrorContains(t, err, "inferenceExtension.admission.enabled")
}
