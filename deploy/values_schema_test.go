package deploy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
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

// TestChartRefusesAnUnquotedFlagValue: Helm reads the values file as YAML
// 1.1 before the chart sees it, so an unquoted flag value that YAML takes for
// another kind reached kvroute-epp as something else: 0755 as the octal
// number 493 (--mode=493), 1.10 as 1.1, 0x1F as 31, 1_000 as 1000, on or y as
// true, an empty value as <nil>. The chart cannot tell 0755 from 493 once
// read, so every flag value must be a string: the schema refuses any other,
// naming the key, and the template refuses it too where the schema check is
// skipped (helm --skip-schema-validation), saying to quote it.
func TestChartRefusesAnUnquotedFlagValue(t *testing.T) {
	with := func(flags string) string {
		return strings.Replace(minimalValues, "inferenceExtension:\n", "inferenceExtension:\n  flags: {"+flags+"}\n", 1)
	}
	for _, flag := range []string{"mode: 0755", "version: 1.10", "mask: 0x1F", "count: 1_000", "v: 4", "enable-pprof: false", "x: on", "empty: ", "big: 12345678901234567890"} {
		name, _, _ := strings.Cut(flag, ":")
		err := chartValuesError(t, with(flag))
		require.Error(t, err, flag)
		require.Contains(t, err.Error(), "/inferenceExtension/flags/"+name, flag)
		require.Contains(t, err.Error(), "want string", flag)

		ch, err := loader.Load(chartDir)
		require.NoError(t, err)
		vals, err := chartutil.ReadValues([]byte(with(flag)))
		require.NoError(t, err)
		top, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals,
			chartutil.ReleaseOptions{Name: "guide", Namespace: "llm", Revision: 1, IsInstall: true},
			chartutil.DefaultCapabilities, true)
		require.NoError(t, err)
		_, err = engine.Render(ch, top)
		require.Error(t, err, flag)
		require.Contains(t, err.Error(), "inferenceExtension.flags."+name+": not a string", flag)
		require.Contains(t, err.Error(), "quote", flag)
	}
	for _, flag := range []string{`mode: "0755"`, `version: "1.10"`, `v: "4"`, `enable-pprof: "false"`, `x: "on"`, `empty: ""`} {
		require.NoError(t, chartValuesError(t, with(flag)), flag)
	}
	objs := chartObjects(t, loadSchemas(t), with(`mode: "0755", version: "1.10", x: "on"`))
	args := eppArgs(t, objs["Deployment"][0])
	for _, want := range []string{"--mode=0755", "--version=1.10", "--x=on"} {
		require.Contains(t, args, want)
	}
}
