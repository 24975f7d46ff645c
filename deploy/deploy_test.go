package deploy

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/kvroute/kvroute/telemetry"
)

// TestAlertRulesWithPromtool runs promtool's rule checks and unit tests
// (one passing and one firing case per rule). It is skipped when promtool
// is not installed, unless KVROUTE_REQUIRE_PROMTOOL=1.
func TestAlertRulesWithPromtool(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("KVROUTE_REQUIRE_PROMTOOL") == "1" {
			t.Fatalf("promtool is required (KVROUTE_REQUIRE_PROMTOOL=1): %v", err)
		}
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	for _, args := range [][]string{
		{"check", "rules", "kvroute-alerts.yaml"},
		{"test", "rules", "kvroute-alerts.test.yaml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %v:\n%s", args, out)
		require.Contains(t, string(out), "SUCCESS")
	}
	// Every rule has both test cases.
	var rules struct {
		Groups []struct{ Rules []struct{ Alert string } }
	}
	readYAML(t, "prometheus/kvroute-alerts.yaml", &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string
				ExpAlerts []any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		}
	}
	readYAML(t, "prometheus/kvroute-alerts.test.yaml", &tests)
	firing, passing := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname] = true
			} else {
				passing[a.Alertname] = true
			}
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.True(t, firing[r.Alert], "%s has no firing case", r.Alert)
			require.True(t, passing[r.Alert], "%s has no passing case", r.Alert)
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, v))
}

// exportedNames starts a precise router with KV events, rendering and the
// closed loop, a gateway handler, a simulated vLLM engine and an engine
// metrics scraper of it, routes a request through them, and returns every
// metric name the registries describe or expose (series of vectors that
// have no child yet are not scraped, so names come from the collectors'
// descriptions too), with the ext_proc picker's metric names.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	rec := &describing{Registry: prometheus.NewRegistry(), names: names}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	id := ln.Addr().String()
	replay := "tcp://127.0.0.1:0"
	eng, err := server.New(server.Config{Model: "m", EnableScaleOut: true,
		Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 256, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond},
		KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
			ReplayEndpoint: &replay, Topic: "kv@" + id + "@m"}}, server.Options{})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- eng.Serve(ln) }()
	defer func() { require.NoError(t, eng.Close()); <-served }()

	cfg := kvroute.DefaultConfig()
	cfg.Model = "m"
	// A replica of a cluster on a real Redis, for the kvroute_cluster_* metrics.
	redis := redistest.Start(t)
	defer func() { _ = redis.Stop() }() // before the caller's leak check
	cfg.Cluster.Addrs = []string{redis.Addr}
	cfg.Cluster.Pool = "deploy-test"
	cfg.Cluster.ReplicaID = "r0"
	r, err := kvroute.New(context.Background(), cfg, kvroute.Options{Set: telemetry.Set{Registerer: rec}})
	require.NoError(t, err)
	defer r.Close()
	eps := []kvroute.Endpoint{{ID: id, EventsAddress: eng.KVEventsEndpoint(), ReplayAddress: eng.ReplayEndpoint()}}
	require.NoError(t, r.SetEndpoints(eps))
	h, err := gateway.New(gateway.Config{Model: "m", ObserveCachedTokens: true}, r, gateway.Options{Set: telemetry.Set{Registerer: rec}})
	require.NoError(t, err)
	defer h.Close()
	h.SetEndpoints(eps)
	gw := &http.Server{Handler: h}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = gw.Serve(gl) }()
	defer func() { require.NoError(t, gw.Shutdown(context.Background())) }()
	require.Eventually(t, r.Ready, 10*time.Second, 10*time.Millisecond)
	// The engine-metrics scraper on the simulated engine's /metrics, for the
	// kvroute_engine_metrics_* metrics.
	scraper, err := enginemetrics.New(enginemetrics.Config{}, enginemetrics.Options{Set: telemetry.Set{Registerer: rec}})
	require.NoError(t, err)
	defer scraper.Close()
	scraper.SetEndpoints(eps)
	require.Eventually(t, func() bool { _, ok := scraper.Signal(eps[0]); return ok }, 10*time.Second, 10*time.Millisecond)

	// An admission stage, for the kvroute_admission_* metrics.
	adm, err := admission.New(admission.Config{}, admission.Options{Set: telemetry.Set{Registerer: rec}})
	require.NoError(t, err)
	defer adm.Close()

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	body := `{"model":"m","prompt":"` + strings.Repeat("dashboard ", 40) + `","max_tokens":2}`
	for range 2 {
		resp, err := client.Post("http://"+gl.Addr().String()+"/v1/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		_, _ = resp.Body.Read(make([]byte, 1<<16))
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	for name := range extprocMetricNames(t) {
		names[name] = true
	}
	for _, g := range []prometheus.Gatherer{rec.Registry, eng.Registry()} {
		mfs, err := g.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			names[mf.GetName()] = true
		}
	}
	return names
}

// describing is a registry that remembers the name of every metric its
// collectors describe.
type describing struct {
	*prometheus.Registry
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describing) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return d.Registry.Register(c)
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
)

// metricNames returns the metric names a PromQL expression selects.
func metricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRanges.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, m := range promIdent.FindAllStringSubmatch(e, -1) {
		name := m[0]
		if m[1] != "" || promKeywords[strings.ToLower(name)] {
			continue // a function call or an operator
		}
		out = append(out, name)
	}
	return out
}

func TestMetricNamesOfPromQL(t *testing.T) {
	require.Equal(t, []string{"a_total", "b_sum", "vllm:x"},
		metricNames(`sum by (pod, le) (rate(a_total{x="by (y)"}[5m])) / on () group_left () histogram_quantile(0.9, b_sum) and vllm:x > 0.5`))
}

// known reports whether name (or, for _bucket, _sum and _count, its
// histogram) is exported.
func known(names map[string]bool, name string) bool {
	if names[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && names[base] {
			return true
		}
	}
	return false
}

// TestDashboardAndAlertsNameExportedMetrics loads the Grafana dashboard and
// the alert rules and checks every metric name in their expressions against
// a real registry (router, gateway, simulated vLLM). The alerts may name
// vLLM metrics the simulated engine does not export; those are listed.
func TestDashboardAndAlertsNameExportedMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	names := exportedNames(t)

	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile("grafana/kvroute.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &dash))
	require.NotEmpty(t, dash.Panels)
	checked := 0
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			ms := metricNames(tg.Expr)
			require.NotEmpty(t, ms, "%s: %s", p.Title, tg.Expr)
			for _, m := range ms {
				require.True(t, known(names, m), "panel %q names %s, which nothing exports", p.Title, m)
				checked++
			}
		}
	}

	engineOnly := map[string]bool{"vllm:cache_config_info": true} // real vLLM exports it; the simulated engine does not
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	readYAML(t, "prometheus/kvroute-alerts.yaml", &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, m := range metricNames(r.Expr) {
				require.True(t, known(names, m) || engineOnly[m], "alert %s names %s, which nothing exports", r.Alert, m)
			}
		}
	}
	all := make([]string, 0, len(names))
	for n := range names {
		all = append(all, n)
	}
	sort.Strings(all)
	t.Logf("%d dashboard metric references checked against %d exported names", checked, len(all))
}
