package deploy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kvroute/kvroute/llmd"
)

// guideValues is llm-d's precise prefix-cache routing guide's router values
// (a fixture of package llmd, with its origin and license).
const guideValues = "../llmd/testdata/guide/precise-prefix-cache-routing.values.yaml"

// guidePickerConfig returns the guide's pluginsConfigFile and
// pluginsCustomConfig (router.epp in llm-d's router chart).
func guidePickerConfig(t *testing.T) (string, map[string]string) {
	t.Helper()
	var v struct {
		Router struct {
			EPP struct {
				PluginsConfigFile   string            `json:"pluginsConfigFile"`
				PluginsCustomConfig map[string]string `json:"pluginsCustomConfig"`
			} `json:"epp"`
		} `json:"router"`
	}
	readYAML(t, guideValues, &v)
	epp := v.Router.EPP
	require.NotEmpty(t, epp.PluginsConfigFile)
	require.Contains(t, epp.PluginsCustomConfig[epp.PluginsConfigFile], "kind: EndpointPickerConfig")
	return epp.PluginsConfigFile, epp.PluginsCustomConfig
}

// TestChartCarriesAnEndpointPickerConfig gives the chart the guide's
// EndpointPickerConfig under the same keys (pluginsConfigFile,
// pluginsCustomConfig) and checks that the ConfigMap holds the file byte for
// byte, that kvroute-epp reads it (--config at the ConfigMap's mount,
// --strict-config when asked), and that the mounted file loads with
// llmd.Load, as kvroute-epp loads it.
func TestChartCarriesAnEndpointPickerConfig(t *testing.T) {
	file, files := guidePickerConfig(t)
	values, err := yaml.Marshal(map[string]any{
		"inferenceExtension": map[string]any{
			"pluginsConfigFile":   file,
			"pluginsCustomConfig": files,
			"strictConfig":        true,
		},
		"inferencePool": map[string]any{
			"modelServers": map[string]any{"matchLabels": map[string]string{"llm-d.ai/guide": "precise-prefix-cache-routing"}},
		},
	})
	require.NoError(t, err)
	objs := chartObjects(t, loadSchemas(t), string(values))
	require.Len(t, objs["ConfigMap"], 1)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.UnmarshalStrict(objs["ConfigMap"][0], &cm))
	require.Equal(t, files, cm.Data, "the ConfigMap holds the pluginsCustomConfig files, unchanged")

	// The Deployment mounts the ConfigMap and passes the named file.
	require.Len(t, objs["Deployment"], 1)
	args := eppArgs(t, objs["Deployment"][0])
	mount := configMount(t, objs["Deployment"][0], cm.Name)
	require.Contains(t, args, "--config="+mount+"/"+file)
	require.Contains(t, args, "--strict-config")
	for _, a := range args {
		require.False(t, strings.HasPrefix(a, "--model="), "the model comes from the EndpointPickerConfig: %s", a)
	}

	// The file as mounted loads as kvroute-epp loads it.
	cfg, findings, err := llmd.Load(strings.NewReader(cm.Data[file]), llmd.Options{})
	require.NoError(t, err)
	require.Equal(t, "Qwen/Qwen3-32B", cfg.Model)
	require.Equal(t, 64, cfg.BlockSize)
	require.Equal(t, 5556, cfg.Events.EventsPort)
	for _, f := range findings {
		t.Logf("finding (logged by kvroute-epp at start): %s: %s", f.Path, f.Note)
	}
	// --strict-config refuses exactly a file with findings.
	_, _, err = llmd.Load(strings.NewReader(cm.Data[file]), llmd.Options{Strict: true})
	require.Equal(t, len(findings) > 0, err != nil, "strict: %v", err)

	// Without strictConfig, no --strict-config.
	values, err = yaml.Marshal(map[string]any{
		"inferenceExtension": map[string]any{"pluginsConfigFile": file, "pluginsCustomConfig": files},
		"inferencePool":      map[string]any{"modelServers": map[string]any{"matchLabels": map[string]string{"app": "vllm"}}},
	})
	require.NoError(t, err)
	require.NotContains(t, eppArgs(t, chartObjects(t, loadSchemas(t), string(values))["Deployment"][0]), "--strict-config")
}

// configMount returns where the Deployment's epp container mounts the
// ConfigMap name.
func configMount(t *testing.T, doc []byte, name string) string {
	t.Helper()
	var d struct {
		Spec struct {
			Template struct{ Spec corev1.PodSpec }
		}
	}
	require.NoError(t, yaml.Unmarshal(doc, &d))
	vol := ""
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == name {
			vol = v.Name
		}
	}
	require.NotEmpty(t, vol, "no volume of ConfigMap %s", name)
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "epp" {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == vol && m.SubPath == "" {
				return m.MountPath
			}
		}
	}
	t.Fatalf("the epp container does not mount volume %s", vol)
	return ""
}

// TestChartRejectsAMissingPickerConfigFile checks that a pluginsConfigFile
// that is not among pluginsCustomConfig's files, or a file given as a map
// instead of its text, fails the render with the value's name.
func TestChartRejectsAMissingPickerConfigFile(t *testing.T) {
	for name, tc := range map[string]struct{ values, want string }{
		"file not given": {`
inferenceExtension: {pluginsConfigFile: plugins.yaml, pluginsCustomConfig: {other.yaml: "kind: EndpointPickerConfig\n"}}
inferencePool: {modelServers: {matchLabels: {app: vllm}}}
`, `pluginsConfigFile "plugins.yaml" is not a file of inferenceExtension.pluginsCustomConfig`},
		"file as a map": {`
inferenceExtension: {pluginsConfigFile: plugins.yaml, pluginsCustomConfig: {plugins.yaml: {kind: EndpointPickerConfig}}}
inferencePool: {modelServers: {matchLabels: {app: vllm}}}
`, "pluginsCustomConfig.plugins.yaml must be the file's text"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderChart(t, tc.values)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// The chart writes admission.yaml and engine-metrics.yaml into the
// ConfigMap that holds pluginsCustomConfig's files: a file of
// pluginsCustomConfig under either name, with its stage on, made a
// ConfigMap with the key twice, where one of the two files was silently
// dropped. The render fails instead, naming the file.
func TestChartRefusesAPickerFileNamedAsItsOwn(t *testing.T) {
	for name, tc := range map[string]struct{ values, want string }{
		"admission": {`
inferenceExtension:
  pluginsConfigFile: plugins.yaml
  pluginsCustomConfig: {plugins.yaml: "kind: EndpointPickerConfig\n", admission.yaml: "queueTimeout: 5s\n"}
  admission: {enabled: true}
inferencePool: {modelServers: {matchLabels: {app: vllm}}}
`, `inferenceExtension.pluginsCustomConfig.admission.yaml: the chart writes admission.yaml`},
		"engine metrics": {`
inferenceExtension:
  pluginsConfigFile: plugins.yaml
  pluginsCustomConfig: {plugins.yaml: "kind: EndpointPickerConfig\n", engine-metrics.yaml: "interval: 1s\n"}
  admission: {enabled: true}
  engineMetrics: {enabled: true}
inferencePool: {modelServers: {matchLabels: {app: vllm}}}
`, `inferenceExtension.pluginsCustomConfig.engine-metrics.yaml: the chart writes engine-metrics.yaml`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderChart(t, tc.values)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}

	// With the stage off, the name is the user's.
	objs := chartObjects(t, loadSchemas(t), `
inferenceExtension:
  pluginsConfigFile: plugins.yaml
  pluginsCustomConfig: {plugins.yaml: "kind: EndpointPickerConfig\n", admission.yaml: "queueTimeout: 5s\n"}
inferencePool: {modelServers: {matchLabels: {app: vllm}}}
`)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.UnmarshalStrict(objs["ConfigMap"][0], &cm))
	require.Equal(t, "queueTimeout: 5s\n", cm.Data["admission.yaml"])
}
