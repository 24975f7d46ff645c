package deploy

import (
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// chartValuesError returns the error helm install gives values before
// rendering anything: the chart's values.schema.json check.
func chartValuesError(t *testing.T, values string) error {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	vals, err := chartutil.ReadValues([]byte(values))
	require.NoError(t, err)
	_, err = chartutil.ToRenderValues(ch, vals,
		chartutil.ReleaseOptions{Name: "guide", Namespace: "llm", Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities)
	return err
}

// TestChartRejectsUnknownValues: a value the chart does not read, at any
// level, or another case of one it does, fails the install with the key
// named, as an unknown key does in every kvroute configuration, instead of
// being ignored while the chart's default silently applies.
func TestChartRejectsUnknownValues(t *testing.T) {
	for name, tc := range map[string]struct{ values, key string }{
		"top level":           {minimalValues + "replicaCount: 2\n", "replicaCount"},
		"inferenceExtension":  {minimalValues + "inferenceExtension: {replica: 2}\n", "replica"},
		"another case":        {"inferenceExtension: {Model: m}\ninferencePool: {modelServers: {matchLabels: {app: vllm}}}\n", "Model"},
		"image":               {minimalValues + "inferenceExtension: {image: {repository: r}}\n", "repository"},
		"monitoring":          {minimalValues + "inferenceExtension: {monitoring: {prometheus: {enabled: true}}}\n", "enabled"},
		"model servers":       {minimalValues + "inferenceExtension: {monitoring: {prometheus: {modelServers: {interval: 5s}}}}\n", "interval"},
		"admission":           {minimalValues + "inferenceExtension: {admission: {enable: true}}\n", "enable"},
		"pool":                {minimalValues + "inferencePool: {modelServers: {labels: {app: vllm}}}\n", "labels"},
		"target port":         {minimalValues + "inferencePool: {targetPorts: [{port: 8000}]}\n", "port"},
		"route":               {minimalValues + "httpRoute: {timeout: 30s}\n", "timeout"},
		"a number for a flag": {minimalValues + "inferenceExtension: {strictConfig: 1}\n", "strictConfig"},
		// The PodMonitor's port is the container port's name: a number is
		// refused by the API server, so by the chart first.
		"a number for the engines' port": {minimalValues + "inferenceExtension: {monitoring: {prometheus: {modelServers: {port: 8000}}}}\n", "port"},
	} {
		t.Run(name, func(t *testing.T) {
			err := chartValuesError(t, tc.values)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.key)
		})
	}
}

// TestChartSchemaTakesEveryDocumentedValue: the chart's defaults, the
// fewest values, every option on, and the free-form parts (kvroute's own
// configuration, checked by kvroute-epp, and Kubernetes fields) pass the
// schema.
func TestChartSchemaTakesEveryDocumentedValue(t *testing.T) {
	for name, values := range map[string]string{
		"defaults": "",
		"minimal":  minimalValues,
		"full":     fullValues,
		"free-form": minimalValues + `
inferenceExtension:
  config: {speculative: {ttl: 2s}, index: {maxBytes: 1000000}}
  pluginsConfigFile: p.yaml
  pluginsCustomConfig: {p.yaml: "kind: EndpointPickerConfig\n"}
  admission: {enabled: true, config: {objectives: [{name: interactive, priority: 1, queueTimeout: 10s}]}}
  engineMetrics: {enabled: true, config: {interval: 1s}}
  resources: {limits: {memory: 8Gi}}
  affinity: {nodeAffinity: {}}
  image: {tag: 0.2}
  monitoring: {prometheus: {enable: true, interval: 30s, rules: {enable: false}, modelServers: {enable: true, port: metrics, path: /metrics}}}
httpRoute: {enable: true, parentRefs: [{name: gw}], path: /v1, requestTimeout: 60s}
`,
	} {
		require.NoError(t, chartValuesError(t, values), name)
	}
}
