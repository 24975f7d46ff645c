package deploy

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// kvroute-epp, as llm-d's router EPP, asks for a Kubernetes token from each
// metrics caller by default; the plain manifests and the chart, whose
// monitors scrape without one by default, pass --metrics-endpoint-auth=false. The
// chart's metricsEndpointAuth turns it on with the RBAC it needs: the
// picker may review tokens and access (system:auth-delegator), and a
// ClusterRole grants get on /metrics to bind a Prometheus to.
func TestManifestsMetricsEndpointAuth(t *testing.T) {
	b, err := os.ReadFile("kvroute-epp/deployment.yaml")
	require.NoError(t, err)
	for _, doc := range splitDocs(t, "deployment.yaml", b) {
		if strings.Contains(string(doc), "kind: Deployment") {
			require.Contains(t, eppArgs(t, doc), "--metrics-endpoint-auth=false")
		}
	}

	s := loadSchemas(t)
	minimal := chartObjects(t, s, minimalValues)
	require.Contains(t, eppArgs(t, minimal["Deployment"][0]), "--metrics-endpoint-auth=false")
	require.Empty(t, minimal["ClusterRoleBinding"])
	require.Empty(t, minimal["ClusterRole"])

	on := chartObjects(t, s, strings.Replace(minimalValues, "inferenceExtension:\n", "inferenceExtension:\n  metricsEndpointAuth: true\n", 1))
	require.Contains(t, eppArgs(t, on["Deployment"][0]), "--metrics-endpoint-auth=true")
	require.Len(t, on["ClusterRoleBinding"], 1)
	var crb rbacv1.ClusterRoleBinding
	require.NoError(t, yaml.UnmarshalStrict(on["ClusterRoleBinding"][0], &crb))
	require.Equal(t, "system:auth-delegator", crb.RoleRef.Name)
	require.Equal(t, "ServiceAccount", crb.Subjects[0].Kind)
	require.Equal(t, "llm", crb.Subjects[0].Namespace)
	require.Len(t, on["ClusterRole"], 1)
	var cr rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict(on["ClusterRole"][0], &cr))
	require.Equal(t, []string{"/metrics"}, cr.Rules[0].NonResourceURLs)
	require.Equal(t, []string{"get"}, cr.Rules[0].Verbs)
}

// With metricsEndpointAuth, the chart's own ServiceMonitor must send a
// token the picker allows, or every scrape is answered 401 and the
// dashboard and alert rules see nothing: it sends the token of a service
// account of its own (a kubernetes.io/service-account-token Secret in the
// release's namespace, which the Prometheus Operator reads), bound to the
// ClusterRole that grants get on /metrics and nothing else.
func TestChartServiceMonitorSendsATokenWithMetricsEndpointAuth(t *testing.T) {
	s := loadSchemas(t)
	off := chartObjects(t, s, strings.Replace(minimalValues, "inferenceExtension:\n",
		"inferenceExtension:\n  monitoring: {prometheus: {enable: true}}\n", 1))
	require.Len(t, off["ServiceMonitor"], 1)
	require.NotContains(t, string(off["ServiceMonitor"][0]), "authorization")
	require.Empty(t, off["Secret"])

	on := chartObjects(t, s, strings.Replace(minimalValues, "inferenceExtension:\n",
		"inferenceExtension:\n  metricsEndpointAuth: true\n  monitoring: {prometheus: {enable: true}}\n", 1))
	var sm struct {
		Spec struct {
			Endpoints []struct {
				Port          string
				Path          string
				Authorization *struct {
					Type        string
					Credentials struct{ Name, Key string }
				}
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(on["ServiceMonitor"][0], &sm))
	require.Len(t, sm.Spec.Endpoints, 1)
	ep := sm.Spec.Endpoints[0]
	require.Equal(t, "/metrics", ep.Path)
	require.NotNil(t, ep.Authorization, "the ServiceMonitor scrapes without a token:\n%s", on["ServiceMonitor"][0])
	require.Equal(t, "Bearer", ep.Authorization.Type)
	require.Equal(t, "token", ep.Authorization.Credentials.Key)

	// The Secret holds the token of a service account of the chart's.
	require.Len(t, on["Secret"], 1)
	var secret corev1.Secret
	require.NoError(t, yaml.UnmarshalStrict(on["Secret"][0], &secret))
	require.Equal(t, ep.Authorization.Credentials.Name, secret.Name)
	require.Equal(t, "llm", secret.Namespace)
	require.Equal(t, corev1.SecretTypeServiceAccountToken, secret.Type)
	reader := secret.Annotations[corev1.ServiceAccountNameKey]
	accounts := map[string]bool{}
	for _, doc := range on["ServiceAccount"] {
		var sa corev1.ServiceAccount
		require.NoError(t, yaml.UnmarshalStrict(doc, &sa))
		accounts[sa.Name] = true
	}
	require.True(t, accounts[reader], "the token's service account %q is not the chart's", reader)

	// That account may get /metrics: bound to the metrics-reader
	// ClusterRole, not to the picker's auth-delegator.
	var reads []string
	for _, doc := range on["ClusterRoleBinding"] {
		var crb rbacv1.ClusterRoleBinding
		require.NoError(t, yaml.UnmarshalStrict(doc, &crb))
		for _, sub := range crb.Subjects {
			if sub.Kind == "ServiceAccount" && sub.Name == reader && sub.Namespace == "llm" {
				reads = append(reads, crb.RoleRef.Name)
			}
		}
	}
	require.Len(t, on["ClusterRole"], 1)
	var cr rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict(on["ClusterRole"][0], &cr))
	require.Equal(t, []string{cr.Name}, reads)
	require.Equal(t, []string{"/metrics"}, cr.Rules[0].NonResourceURLs)
}

// The bounds of the picker's token and access reviews are its own flags,
// which the chart passes through inferenceExtension.flags as given (it
// sets none of them itself, so the picker's defaults hold without them).
func TestChartPassesTheMetricsAuthBounds(t *testing.T) {
	s := loadSchemas(t)
	args := eppArgs(t, chartObjects(t, s, minimalValues)["Deployment"][0])
	for _, a := range args {
		require.NotContains(t, a, "--metrics-auth-", "the chart sets no review bound of its own")
	}
	on := chartObjects(t, s, strings.Replace(minimalValues, "inferenceExtension:\n",
		"inferenceExtension:\n  metricsEndpointAuth: true\n  flags: {metrics-auth-allow-ttl: 30s, metrics-auth-deny-ttl: 5s, metrics-auth-cache-entries: \"1024\", metrics-auth-max-in-flight: \"4\", metrics-auth-review-rate: \"0.5\"}\n", 1))
	args = eppArgs(t, on["Deployment"][0])
	for _, want := range []string{"--metrics-auth-allow-ttl=30s", "--metrics-auth-deny-ttl=5s", "--metrics-auth-cache-entries=1024", "--metrics-auth-max-in-flight=4", "--metrics-auth-review-rate=0.5"} {
		require.Contains(t, args, want)
	}
}

// The picker's stop timeouts after the drain window are its own flags,
// which the chart passes through inferenceExtension.flags as given (it
// sets none of them, so the picker's defaults, within the pod's grace
// period, hold without them).
func TestChartPassesTheStopTimeouts(t *testing.T) {
	s := loadSchemas(t)
	args := eppArgs(t, chartObjects(t, s, minimalValues)["Deployment"][0])
	for _, a := range args {
		require.NotContains(t, a, "shutdown-timeout", "the chart sets no stop timeout of its own")
	}
	on := chartObjects(t, s, strings.Replace(minimalValues, "inferenceExtension:\n",
		"inferenceExtension:\n  flags: {drain-timeout: 20s, shutdown-timeout: 15s, metrics-shutdown-timeout: 2s}\n", 1))
	args = eppArgs(t, on["Deployment"][0])
	for _, want := range []string{"--drain-timeout=20s", "--shutdown-timeout=15s", "--metrics-shutdown-timeout=2s"} {
		require.Contains(t, args, want)
	}
}
