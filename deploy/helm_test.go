package deploy

import (
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/kvroute/kvroute/llmd"
)

const chartDir = "helm/kvroute-epp"

// renderChart renders the chart as helm install would (release "guide" in
// namespace "llm") with the given values over the chart's defaults, and
// returns the rendered manifests by template path.
func renderChart(t *testing.T, values string) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	vals, err := chartutil.ReadValues([]byte(values))
	require.NoError(t, err)
	require.NoError(t, chartutil.ProcessDependenciesWithMerge(ch, vals))
	top, err := chartutil.ToRenderValues(ch, vals,
		chartutil.ReleaseOptions{Name: "guide", Namespace: "llm", Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities)
	require.NoError(t, err)
	return engine.Render(ch, top)
}

// chartObjects renders the chart and returns its objects as YAML documents,
// each validated against the API.
func chartObjects(t *testing.T, s *schemas, values string) map[string][][]byte {
	t.Helper()
	out, err := renderChart(t, values)
	require.NoError(t, err)
	byKind := map[string][][]byte{}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if path.Ext(name) != ".yaml" {
			continue // NOTES.txt, _helpers.tpl
		}
		for _, doc := range splitDocs(t, name, []byte(out[name])) {
			gvk, err := s.validate(doc)
			require.NoError(t, err, "%s:\n%s", name, doc)
			byKind[gvk.Kind] = append(byKind[gvk.Kind], doc)
		}
	}
	return byKind
}

const (
	minimalValues = `
inferenceExtension:
  model: Qwen/Qwen3-32B
inferencePool:
  modelServers:
    matchLabels: {llm-d.ai/guide: precise-prefix-cache-routing}
`
	fullValues = `
inferenceExtension:
  image: {hub: registry.example.com/kvroute, tag: v0.1.0}
  model: Qwen/Qwen3-32B
  podLabelSelector: llm-d.ai/role=decode
  strictConfig: true
  fallbacks: 2
  conformanceTestHooks: true
  observeCachedTokens: true
  maxBodyBytes: 8388608
  maxBodyBytesInFlight: 268435456
  grpcMaxConcurrentStreams: 1000
  secureServing: true
  flags: {log-level: debug, readiness-interval: 2s}
  env: [{name: GOMAXPROCS, value: "2"}]
  nodeSelector: {kubernetes.io/os: linux}
  tolerations: [{key: dedicated, operator: Equal, value: router, effect: NoSchedule}]
  config:
    blockSize: 64
    events: {enabled: true, eventsPort: 5556, replayPort: 5559}
  monitoring:
    prometheus:
      enable: true
      labels: {release: kube-prometheus-stack}
inferencePool:
  name: qwen-pool
  targetPorts: [{number: 8000}, {number: 8001}]
  modelServers:
    matchLabels: {llm-d.ai/guide: precise-prefix-cache-routing}
  failureMode: FailOpen
httpRoute:
  enable: true
  parentRefs: [{name: inference-gateway, sectionName: http}]
  hostnames: [llm.example.com]
`
)

// TestChartRendersValidObjects renders the chart with Helm's own engine,
// with the fewest values and with every option on, and validates every
// object against the API (built-in kinds strictly, custom resources against
// their CRDs).
func TestChartRendersValidObjects(t *testing.T) {
	s := loadSchemas(t)
	minimal := chartObjects(t, s, minimalValues)
	for _, kind := range []string{"ConfigMap", "Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "InferencePool"} {
		require.Len(t, minimal[kind], 1, kind)
	}
	for _, kind := range []string{"HTTPRoute", "ServiceMonitor", "PodMonitor", "PrometheusRule"} {
		require.Empty(t, minimal[kind], "%s without being asked for", kind)
	}

	full := chartObjects(t, s, fullValues)
	for _, kind := range []string{"ConfigMap", "Deployment", "Service", "InferencePool", "HTTPRoute", "ServiceMonitor", "PodMonitor", "PrometheusRule"} {
		require.Len(t, full[kind], 1, kind)
	}

	// The pool points at the picker's Service and port; the route at the pool.
	var pool struct {
		Metadata struct{ Name string }
		Spec     struct {
			EndpointPickerRef struct {
				Name string
				Port struct{ Number int }
			} `json:"endpointPickerRef"`
		}
	}
	require.NoError(t, yaml.Unmarshal(full["InferencePool"][0], &pool))
	require.Equal(t, "qwen-pool", pool.Metadata.Name)
	var svc struct {
		Metadata struct{ Name string }
		Spec     struct {
			Ports []struct {
				Name string
				Port int
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(full["Service"][0], &svc))
	require.Equal(t, svc.Metadata.Name, pool.Spec.EndpointPickerRef.Name)
	require.Equal(t, "grpc", svc.Spec.Ports[0].Name)
	require.Equal(t, svc.Spec.Ports[0].Port, pool.Spec.EndpointPickerRef.Port.Number)
	require.Contains(t, string(full["HTTPRoute"][0]), "name: qwen-pool")

	// Both monitors label every series with the pool, as the rules expect.
	for _, kind := range []string{"ServiceMonitor", "PodMonitor"} {
		doc := string(full[kind][0])
		require.Contains(t, doc, "targetLabel: pool", kind)
		require.Contains(t, doc, `replacement: "qwen-pool"`, kind)
		require.Contains(t, doc, "release: kube-prometheus-stack", kind)
	}
	requireEndpointLabelKept(t, full["ServiceMonitor"][0])

	// The picker's flags.
	args := eppArgs(t, full["Deployment"][0])
	for _, want := range []string{"--pool-name=qwen-pool", "--pool-namespace=llm", "--model=Qwen/Qwen3-32B",
		"--event-selector=llm-d.ai/role=decode", "--log-level=debug", "--readiness-interval=2s", "--strict-config",
		"--config=/etc/kvroute/config.yaml", "--fallbacks=2", "--conformance-test-hooks", "--observe-cached-tokens",
		"--max-body-bytes=8388608", "--max-body-bytes-in-flight=268435456", "--grpc-max-concurrent-streams=1000",
		"--secure-serving=true"} {
		require.Contains(t, args, want)
	}
	// Without them, the picker's own defaults: no flag; but h2c, which the
	// chart's Service announces, rather than the picker's default TLS.
	require.Contains(t, eppArgs(t, minimal["Deployment"][0]), "--secure-serving=false")
	for _, a := range eppArgs(t, minimal["Deployment"][0]) {
		require.NotContains(t, a, "--max-body-bytes")
		require.NotContains(t, a, "--grpc-max-concurrent-streams")
		require.NotContains(t, a, "--observe-cached-tokens")
	}
}

// eppArgs returns the args of the picker's container.
func eppArgs(t *testing.T, doc []byte) []string {
	t.Helper()
	return eppContainer(t, doc).Args
}

// eppContainer returns the picker's container of a Deployment.
func eppContainer(t *testing.T, doc []byte) corev1.Container {
	t.Helper()
	var d appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict(doc, &d))
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "epp" {
			return c
		}
	}
	t.Fatalf("no epp container in %s", d.Name)
	return corev1.Container{}
}

// TestChartRejectsMissingValues checks that the chart fails to render, with
// a message naming the value, where an install could not work.
func TestChartRejectsMissingValues(t *testing.T) {
	for name, tc := range map[string]struct{ values, want string }{
		"no engine selector":    {"inferenceExtension: {model: m}\n", "inferencePool.modelServers.matchLabels is required"},
		"no model":              {"inferencePool: {modelServers: {matchLabels: {app: vllm}}}\n", "inferenceExtension.model is required"},
		"route without gateway": {minimalValues + "httpRoute: {enable: true}\n", "httpRoute.parentRefs is required"},
		"negative body budget":  {"inferenceExtension: {model: m, maxBodyBytesInFlight: -1}\ninferencePool: {modelServers: {matchLabels: {app: vllm}}}\n", "maxBodyBytesInFlight (-1) must not be negative"},
		"too many fallbacks":    {"inferenceExtension: {model: m, fallbacks: 17}\ninferencePool: {modelServers: {matchLabels: {app: vllm}}}\n", "inferenceExtension.fallbacks 17 is not between 0 and 16"},
		// The picker's Service is <pool>-epp, at most 63 characters: a longer
		// pool name is refused, not cut (an HTTPRoute of the user's naming the
		// pool would name no pool).
		"pool name too long": {"inferenceExtension: {model: m}\ninferencePool: {name: " + strings.Repeat("p", 60) + ", modelServers: {matchLabels: {app: vllm}}}\n", "inferencePool.name " + strings.Repeat("p", 60) + " is longer than 59 characters"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderChart(t, tc.values)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestChartAlertRulesAreTheRuleFile checks that the chart's copy of the
// alert rules is deploy/prometheus/kvroute-alerts.yaml (which promtool
// tests) and that its PrometheusRule holds exactly those groups.
func TestChartAlertRulesAreTheRuleFile(t *testing.T) {
	canonical, err := os.ReadFile("prometheus/kvroute-alerts.yaml")
	require.NoError(t, err)
	cp, err := os.ReadFile(chartDir + "/files/kvroute-alerts.yaml")
	require.NoError(t, err)
	require.Equal(t, string(canonical), string(cp), "copy prometheus/kvroute-alerts.yaml to %s/files/", chartDir)

	full := chartObjects(t, loadSchemas(t), fullValues)
	var rule struct {
		Spec map[string]any
	}
	require.NoError(t, yaml.Unmarshal(full["PrometheusRule"][0], &rule))
	var want map[string]any
	require.NoError(t, yaml.Unmarshal(canonical, &want))
	require.Equal(t, want, rule.Spec)
}

// TestRouterConfigsLoad checks that the router configuration the chart and
// the plain manifests give kvroute-epp is accepted by kvroute's strict
// configuration loading (unknown keys are errors there).
func TestRouterConfigsLoad(t *testing.T) {
	s := loadSchemas(t)
	configMaps := chartObjects(t, s, fullValues)["ConfigMap"]
	b, err := os.ReadFile("kvroute-epp/deployment.yaml")
	require.NoError(t, err)
	for _, doc := range splitDocs(t, "deployment.yaml", b) {
		if strings.Contains(string(doc), "kind: ConfigMap") {
			configMaps = append(configMaps, doc)
		}
	}
	require.Len(t, configMaps, 2)
	for _, doc := range configMaps {
		var cm struct{ Data map[string]string }
		require.NoError(t, yaml.Unmarshal(doc, &cm))
		js, err := yaml.YAMLToJSON([]byte(cm.Data["config.yaml"]))
		require.NoError(t, err)
		cfg, err := llmd.Translate(strings.NewReader(string(js)))
		require.NoError(t, err, "%s", cm.Data["config.yaml"])
		require.Equal(t, 64, cfg.BlockSize)
	}
}

// flagSource is a place that passes kvroute-epp flags.
type flagSource struct {
	name  string
	flags []string
}

// manifestFlagSources returns the flag names that the plain Deployment and
// the chart's Deployment (every option on) pass to kvroute-epp.
func manifestFlagSources(t *testing.T) []flagSource {
	t.Helper()
	s := loadSchemas(t)
	var srcs []flagSource
	add := func(name string, doc []byte) {
		var flags []string
		for _, a := range eppArgs(t, doc) {
			if f, ok := strings.CutPrefix(a, "--"); ok {
				f, _, _ = strings.Cut(f, "=")
				flags = append(flags, f)
			}
		}
		require.NotEmpty(t, flags, name)
		srcs = append(srcs, flagSource{name, flags})
	}
	add("chart", chartObjects(t, s, fullValues)["Deployment"][0])
	b, err := os.ReadFile("kvroute-epp/deployment.yaml")
	require.NoError(t, err)
	for _, doc := range splitDocs(t, "deployment.yaml", b) {
		if strings.Contains(string(doc), "kind: Deployment") {
			add("kvroute-epp/deployment.yaml", doc)
		}
	}
	require.Len(t, srcs, 2)
	require.True(t, slices.ContainsFunc(srcs[0].flags, func(f string) bool { return f == "pool-name" }))
	return srcs
}

// TestManifestsServeH2C: kvroute-epp serves ext_proc over TLS by default,
// as the Inference Extension's picker; the plain manifests and the chart,
// whose Services announce h2c (appProtocol http2), turn it off (the chart's
// in TestChartRendersValidObjects).
func TestManifestsServeH2C(t *testing.T) {
	b, err := os.ReadFile("kvroute-epp/deployment.yaml")
	require.NoError(t, err)
	for _, doc := range splitDocs(t, "deployment.yaml", b) {
		if strings.Contains(string(doc), "kind: Deployment") {
			require.Contains(t, eppArgs(t, doc), "--secure-serving=false")
		}
	}
}

// requireEndpointLabelKept checks that a ServiceMonitor of the picker drops
// the "endpoint" target label the Prometheus Operator gives every target
// (the port's name) before the scrape: kvroute's per-endpoint series
// (kvroute_router_endpoint_inaccurate, kvroute_engine_metrics_*) carry an
// "endpoint" label of their own, which the alerts and the dashboard group
// by, and Prometheus would rename it exported_endpoint on the conflict.
func requireEndpointLabelKept(t *testing.T, doc []byte) {
	t.Helper()
	var sm struct {
		Spec struct {
			Endpoints []struct {
				Relabelings []struct{ Action, Regex string }
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(doc, &sm))
	require.NotEmpty(t, sm.Spec.Endpoints)
	for _, ep := range sm.Spec.Endpoints {
		dropped := false
		for _, r := range ep.Relabelings {
			if strings.EqualFold(r.Action, "labeldrop") && r.Regex == "endpoint" {
				dropped = true
			}
		}
		require.True(t, dropped, "the ServiceMonitor keeps the operator's endpoint target label:\n%s", doc)
	}
}

// inferenceExtension.flags are rendered --name=value with the value as the
// values file writes it, a string (the schema and the template refuse a
// number or a boolean, which YAML reads as something other than written):
// a big number stays the integer written, not Go's exponent form of
// Helm's float64 (--max-body-bytes=6.7108864e+07, which kvroute-epp refuses).
func TestChartRendersFlagValuesAsWritten(t *testing.T) {
	objs := chartObjects(t, loadSchemas(t), strings.Replace(minimalValues, "inferenceExtension:\n",
		"inferenceExtension:\n  flags: {max-body-bytes: \"67108864\", grpc-max-recv-msg-size: \"104857600\", v: \"4\", "+
			"readiness-interval: 2s, enable-pprof: \"false\", ratio: \"0.25\", negative: \"-3000000\"}\n", 1))
	args := eppArgs(t, objs["Deployment"][0])
	for _, want := range []string{"--max-body-bytes=67108864", "--grpc-max-recv-msg-size=104857600", "--v=4",
		"--readiness-interval=2s", "--enable-pprof=false", "--ratio=0.25", "--negative=-3000000"} {
		require.Contains(t, args, want)
	}
}

// An inferenceExtension.flags value is rendered as one quoted string, so
// that YAML reads back the argument written: unquoted, a value with ": "
// made the argument a mapping (invalid args), one with " #" lost its rest
// as a comment, and quotes, backslashes or a line break broke the list.
// Strings YAML would read as another kind on their own ("true", "1e3",
// "0755") stay the strings they are.
func TestChartQuotesFlagValues(t *testing.T) {
	objs := chartObjects(t, loadSchemas(t), strings.Replace(minimalValues, "inferenceExtension:\n",
		"inferenceExtension:\n  flags: {a: \"app: x\", b: \"x #y\", c: \"true\", d: \"1e3\", e: \"0755\", "+
			"f: \"say \\\"hi\\\" \\\\ there\", g: \"two\\nlines\", h: \"\", i: \"{x}\", j: \"*star\", k: \"'sq'\"}\n", 1))
	args := eppArgs(t, objs["Deployment"][0])
	for _, want := range []string{"--a=app: x", "--b=x #y", "--c=true", "--d=1e3", "--e=0755",
		`--f=say "hi" \ there`, "--g=two\nlines", "--h=", "--i={x}", "--j=*star", "--k='sq'"} {
		require.Contains(t, args, want)
	}
}

// kvroute-epp --ha-enable-leader-election, passed through
// inferenceExtension.flags, competes for a coordination.k8s.io Lease in the
// pool's namespace (client-go's LeaseLock gets, creates and updates it):
// the chart's Role grants that then, and only then, or no replica could
// ever take the Lease and become ready.
func TestChartGrantsTheLeaseToLeaderElection(t *testing.T) {
	leases := func(values string) []rbacv1.PolicyRule {
		t.Helper()
		objs := chartObjects(t, loadSchemas(t), values)
		require.Len(t, objs["Role"], 1)
		var role rbacv1.Role
		require.NoError(t, yaml.UnmarshalStrict(objs["Role"][0], &role))
		var out []rbacv1.PolicyRule
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, "coordination.k8s.io") {
				out = append(out, r)
			}
		}
		return out
	}
	require.Empty(t, leases(minimalValues))
	for _, v := range []string{`"true"`, `"True"`, `"1"`, `"t"`} {
		rules := leases(strings.Replace(minimalValues, "inferenceExtension:\n",
			"inferenceExtension:\n  replicas: 2\n  flags: {ha-enable-leader-election: "+v+"}\n", 1))
		require.Len(t, rules, 1, v)
		require.Equal(t, []string{"leases"}, rules[0].Resources)
		for _, verb := range []string{"get", "create", "update"} {
			require.Contains(t, rules[0].Verbs, verb)
		}
	}
	require.Empty(t, leases(strings.Replace(minimalValues, "inferenceExtension:\n",
		"inferenceExtension:\n  flags: {ha-enable-leader-election: \"false\"}\n", 1)))
}

// inferenceExtension.image.tag may be a number in the values file (the
// schema takes one): Helm reads it as a float64, which Go prints in
// exponent form from a million on, so a date tag 20261206 became the image
// kvroute-epp:2.0261206e+07, which no registry holds. A whole number is
// rendered as the integer it is, as a flag's is.
func TestChartRendersANumericImageTagAsWritten(t *testing.T) {
	for tag, want := range map[string]string{"20261206": "20261206", "7": "7", "0.2": "0.2", `"20261206"`: "20261206", "v0.1.0": "v0.1.0"} {
		objs := chartObjects(t, loadSchemas(t), strings.Replace(minimalValues, "inferenceExtension:\n",
			"inferenceExtension:\n  image: {hub: registry.example.com/kvroute, tag: "+tag+"}\n", 1))
		require.Equal(t, "registry.example.com/kvroute/kvroute-epp:"+want, eppContainer(t, objs["Deployment"][0]).Image, tag)
	}
}

// A flag of inferenceExtension.flags that the chart also passes from a
// value of its own came after it and won (Go's flag package keeps the last),
// while the Service, the probes, the InferencePool and the RBAC still
// followed the value: flags: {grpc-port: 9100} left the pool's
// endpointPickerRef on 9002, where nothing listened. The render fails
// instead, naming the value to set.
func TestChartRefusesAFlagItPassesFromAValue(t *testing.T) {
	with := func(values string) string {
		return strings.Replace(minimalValues, "inferenceExtension:\n", "inferenceExtension:\n"+values, 1)
	}
	for flag, want := range map[string]string{
		"grpc-port: \"9100\"":             "inferenceExtension.extProcPort",
		"grpc-health-port: \"9100\"":      "inferenceExtension.healthPort",
		"metrics-port: \"9100\"":          "inferenceExtension.metricsPort",
		"pool-name: other":                "inferencePool.name",
		"pool-namespace: other":           "the release's namespace",
		"config: /etc/other.yaml":         "inferenceExtension.config",
		"config-file: /etc/o.yaml":        "inferenceExtension.config",
		"secure-serving: \"true\"":        "inferenceExtension.secureServing",
		"metrics-endpoint-auth: \"true\"": "inferenceExtension.metricsEndpointAuth",
		"tracing: \"true\"":               "inferenceExtension.tracing.enabled",
		"model: other":                    "inferenceExtension.model",
		"checkpoint: /tmp/x":              "inferenceExtension.checkpoint.enabled",
	} {
		name, _, _ := strings.Cut(flag, ":")
		_, err := renderChart(t, with("  flags: {"+flag+"}\n"))
		require.Error(t, err, flag)
		require.Contains(t, err.Error(), "inferenceExtension.flags."+name+": the chart passes --"+name+" itself, from "+want, flag)
	}
	// A flag the chart passes only with its value set is the user's to give
	// while the value is unset.
	objs := chartObjects(t, loadSchemas(t), with("  flags: {fallbacks: \"2\"}\n"))
	require.Contains(t, eppArgs(t, objs["Deployment"][0]), "--fallbacks=2")
	_, err := renderChart(t, with("  fallbacks: 1\n  flags: {fallbacks: \"2\"}\n"))
	require.ErrorContains(t, err, "inferenceExtension.flags.fallbacks: the chart passes --fallbacks itself, from inferenceExtension.fallbacks")
}

// The README has secureServing take its certificate from
// inferenceExtension.flags' cert-path, a mounted TLS secret: the chart
// mounts one with inferenceExtension.volumes and volumeMounts (the names of
// llm-d's router chart, router.epp.volumes and volumeMounts), beside its
// own config and state volumes.
func TestChartMountsVolumesOfTheValues(t *testing.T) {
	objs := chartObjects(t, loadSchemas(t), strings.Replace(minimalValues, "inferenceExtension:\n", `inferenceExtension:
  secureServing: true
  flags: {cert-path: /etc/kvroute-tls, enable-cert-reload: "true"}
  volumes: [{name: tls, secret: {secretName: kvroute-epp-tls}}]
  volumeMounts: [{name: tls, mountPath: /etc/kvroute-tls, readOnly: true}]
`, 1))
	var d appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict(objs["Deployment"][0], &d))
	var vols []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		vols = append(vols, v.Name)
		if v.Name == "tls" {
			require.Equal(t, "kvroute-epp-tls", v.Secret.SecretName)
		}
	}
	require.ElementsMatch(t, []string{"config", "state", "tls"}, vols)
	c := eppContainer(t, objs["Deployment"][0])
	require.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/etc/kvroute-tls", ReadOnly: true})
	require.Contains(t, c.Args, "--cert-path=/etc/kvroute-tls")
}
