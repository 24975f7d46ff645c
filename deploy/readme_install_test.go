package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// readmeHelmInstall matches the README's helm install command: its release
// name and the rest of its lines.
var readmeHelmInstall = regexp.MustCompile(`(?s)helm install (\S+) deploy/helm/kvroute-epp -n \S+ \\\n(.*?)\n\s*` + "```")

// readmeHelmSet matches one --set of the command, quoted or not.
var readmeHelmSet = regexp.MustCompile(`--set (?:'([^']*)'|(\S+))`)

// TestREADMEHelmInstall installs the chart with the README's helm install
// values, as helm would: they pass the chart's schema, every object renders
// and validates against the Kubernetes API, and the picker's Deployment is
// <release>-epp, the name the README's kubectl rollout status waits on.
func TestREADMEHelmInstall(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	m := readmeHelmInstall.FindStringSubmatch(string(readme))
	require.NotNil(t, m, "the README gives a helm install command")
	release := m[1]
	vals := map[string]any{}
	sets := readmeHelmSet.FindAllStringSubmatch(m[2], -1)
	require.GreaterOrEqual(t, len(sets), 4, "the command sets the chart's values")
	for _, s := range sets {
		require.NoError(t, strvals.ParseInto(s[1]+s[2], vals), s[0])
	}
	values, err := yaml.Marshal(vals)
	require.NoError(t, err)
	require.NoError(t, chartValuesError(t, string(values)), "%s", values)

	objs := chartObjects(t, loadSchemas(t), string(values))
	require.Len(t, objs["Deployment"], 1)
	var d appsv1.Deployment
	require.NoError(t, yaml.Unmarshal(objs["Deployment"][0], &d))
	// renderChart installs the release "guide".
	require.Equal(t, "guide-epp", d.Name)
	require.Contains(t, string(readme), "kubectl rollout status -n llm deploy/"+release+"-epp")
	require.True(t, strings.HasPrefix(d.Spec.Template.Spec.Containers[0].Image, "REGISTRY/"), d.Spec.Template.Spec.Containers[0].Image)
}
