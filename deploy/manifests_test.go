package deploy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestManifestsMatchTheAPI validates every object of the plain manifests in
// kvroute-epp/ against the API it is applied to: a field that does not exist
// (such as the pre-release endpointPickerRef.portNumber) fails here rather
// than at kubectl apply.
func TestManifestsMatchTheAPI(t *testing.T) {
	s := loadSchemas(t)
	files, err := filepath.Glob("kvroute-epp/*.yaml")
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, gvk := range s.validateAll(t, f, b) {
			seen[gvk.Kind] = true
		}
	}
	for _, kind := range []string{"InferencePool", "Deployment", "Service", "ConfigMap", "ServiceAccount", "Role",
		"RoleBinding", "HTTPRoute", "ServiceMonitor", "PodMonitor"} {
		require.True(t, seen[kind], "kvroute-epp/ has no %s", kind)
	}
}

// TestValidatorRejects checks that the validation fails on what the API
// server rejects: unknown fields in built-in kinds and custom resources,
// values outside the schema, and the CRD's CEL rules.
func TestValidatorRejects(t *testing.T) {
	s := loadSchemas(t)
	pool := func(ref string) string {
		return `apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: p, namespace: llm}
spec:
  selector: {matchLabels: {app: vllm}}
  targetPorts: [{number: 8000}]
  endpointPickerRef: ` + ref + "\n"
	}
	_, err := s.validate([]byte(pool(`{name: epp, port: {number: 9002}}`)))
	require.NoError(t, err)
	for name, tc := range map[string]struct{ doc, want string }{
		"pre-release portNumber":   {pool(`{name: epp, portNumber: 9002, failureMode: FailClose}`), "spec.endpointPickerRef.portNumber"},
		"port missing for Service": {pool(`{name: epp}`), "port is required"},
		"bad failure mode":         {pool(`{name: epp, port: {number: 9002}, failureMode: Sometimes}`), "failureMode"},
		"port out of range":        {pool(`{name: epp, port: {number: 0}}`), "number"},
		"unknown metadata field": {`apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: p, labelz: {a: b}}
spec: {selector: {matchLabels: {app: vllm}}, targetPorts: [{number: 8000}], endpointPickerRef: {name: e, port: {number: 1}}}
`, "labelz"},
		"unknown Deployment field": {`apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec:
      containers: [{name: c, image: i, resource: {limits: {cpu: "1"}}}]
`, "resource"},
		"unknown ServiceMonitor field": {`apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: m}
spec: {selector: {matchLabels: {app: a}}, endpoints: [{port: metrics, intervall: 15s}]}
`, "intervall"},
		"unknown HTTPRoute field": {`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec: {parentRefs: [{name: g}], rules: [{backendRefs: [{name: p, kind: InferencePool, group: inference.networking.k8s.io, weigth: 1}]}]}
`, "weigth"},
		"unknown kind": {"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n", "neither"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := s.validate([]byte(tc.doc))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	require.True(t, s.crds[schema.GroupVersionKind{Group: "inference.networking.k8s.io", Version: "v1", Kind: "InferencePool"}] != nil)
}
