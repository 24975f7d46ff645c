package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/llmd"
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
	b, err := os.ReadFile("kvroute-epp/monitoring.yaml")
	require.NoError(t, err)
	for _, doc := range splitDocs(t, "monitoring.yaml", b) {
		if strings.Contains(string(doc), "kind: ServiceMonitor") {
			requireEndpointLabelKept(t, doc)
		}
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

// TestVLLMPatchMatchesThePicker checks that the vLLM patch publishes KV
// events where the picker's configuration subscribes (events and replay
// ports), under the topic that names the pod as the pool's endpoint
// ("<pod IP>:<target port>@<model>"), with the block size and the render
// routes (--enable-scale-out) the picker needs, and POD_IP from the pod.
func TestVLLMPatchMatchesThePicker(t *testing.T) {
	b, err := os.ReadFile("kvroute-epp/vllm-patch.yaml")
	require.NoError(t, err)
	var d appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict(b, &d))
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	c := d.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			require.Equal(t, "POD_IP", e.Name)
			require.Equal(t, "status.podIP", e.ValueFrom.FieldRef.FieldPath)
			env[e.Name] = "10.0.0.7"
			continue
		}
		env[e.Name] = e.Value
	}
	require.Contains(t, env, "POD_IP")

	// The picker's side: its router configuration and its pool.
	b, err = os.ReadFile("kvroute-epp/deployment.yaml")
	require.NoError(t, err)
	var cfg kvroute.Config
	for _, doc := range splitDocs(t, "deployment.yaml", b) {
		var cm struct {
			Kind string
			Data map[string]string
		}
		require.NoError(t, yaml.Unmarshal(doc, &cm))
		if cm.Kind == "ConfigMap" {
			js, err := yaml.YAMLToJSON([]byte(cm.Data["config.yaml"]))
			require.NoError(t, err)
			cfg, err = llmd.Translate(strings.NewReader(string(js)))
			require.NoError(t, err)
		}
	}
	b, err = os.ReadFile("kvroute-epp/inferencepool.yaml")
	require.NoError(t, err)
	var pool struct {
		Spec struct {
			Selector    struct{ MatchLabels map[string]string } `json:"selector"`
			TargetPorts []struct{ Number int }                  `json:"targetPorts"`
		}
	}
	require.NoError(t, yaml.Unmarshal(b, &pool))
	require.Equal(t, pool.Spec.Selector.MatchLabels, d.Spec.Template.Labels, "the patched pods are the pool's")

	// $(VAR) is expanded by the kubelet from the container's environment.
	expand := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	args := map[string]string{}
	for _, a := range c.Args {
		a = expand.ReplaceAllStringFunc(a, func(m string) string {
			v, ok := env[m[2:len(m)-1]]
			require.True(t, ok, "%s is not in the container's environment", m)
			return v
		})
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	require.Contains(t, args, "--enable-scale-out", "vLLM serves the render routes only with --enable-scale-out")
	require.Equal(t, strconv.Itoa(cfg.BlockSize), args["--block-size"])
	var kv struct {
		Enable         bool   `json:"enable_kv_cache_events"`
		Publisher      string `json:"publisher"`
		Endpoint       string `json:"endpoint"`
		ReplayEndpoint string `json:"replay_endpoint"`
		Topic          string `json:"topic"`
	}
	dec := json.NewDecoder(strings.NewReader(args["--kv-events-config"]))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&kv), args["--kv-events-config"])
	require.True(t, kv.Enable)
	require.Equal(t, "zmq", kv.Publisher)
	require.Equal(t, fmt.Sprintf("tcp://*:%d", cfg.Events.EventsPort), kv.Endpoint)
	require.Equal(t, fmt.Sprintf("tcp://*:%d", cfg.Events.ReplayPort), kv.ReplayEndpoint)
	require.Equal(t, fmt.Sprintf("kv@10.0.0.7:%d@%s", pool.Spec.TargetPorts[0].Number, cfg.Model), kv.Topic)
	require.Equal(t, "--model="+cfg.Model, "--model="+args["--model"])

	ports := map[int32]bool{}
	for _, p := range c.Ports {
		ports[p.ContainerPort] = true
	}
	for _, p := range []int{pool.Spec.TargetPorts[0].Number, cfg.Events.EventsPort, cfg.Events.ReplayPort} {
		require.True(t, ports[int32(p)], "port %d is not a container port", p)
	}
}
