package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	promAggregation = regexp.MustCompile(`\b(sum|max|min|avg|count|abs|histogram_quantile|label_replace|rate|max_over_time)\s*(by\s*\(([^)]*)\))?\s*\(`)
	promOn          = regexp.MustCompile(`\bon\s*\(([^)]*)\)`)
	promSelector    = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s*(\[|\)|$|\s)`)
)

// labelList splits "a, b" into its label names.
func labelList(s string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(s, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out[l] = true
		}
	}
	return out
}

// requireGroupedByPool fails unless every aggregation (sum, max, min, avg,
// count) of expr keeps the namespace and pool labels and every vector
// matching (on) matches on them, so that series of different pools never
// meet.
func requireGroupedByPool(t checker, what, expr string) {
	t.Helper()
	aggregations := 0
	for _, m := range promAggregation.FindAllStringSubmatch(expr, -1) {
		switch m[1] {
		case "sum", "max", "min", "avg", "count":
			aggregations++
			by := labelList(m[3])
			require.True(t, by["namespace"] && by["pool"], "%s: %q aggregates across pools (by (%s))", what, m[0], m[3])
		}
	}
	require.NotZero(t, aggregations, "%s: %s has no aggregation by namespace and pool", what, expr)
	for _, m := range promOn.FindAllStringSubmatch(expr, -1) {
		on := labelList(m[1])
		require.True(t, on["namespace"] && on["pool"], "%s: %q matches series of different pools", what, m[0])
	}
}

// checker is the part of testing.T that requireGroupedByPool uses.
type checker interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
}

// recorder is a checker that remembers a failure; FailNow ends the
// goroutine as testing.T's does.
type recorder struct{ failed bool }

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) FailNow()              { r.failed = true; runtime.Goexit() }

func TestRequireGroupedByPoolCatchesAggregationAcrossPools(t *testing.T) {
	// The two rules that mixed pools before every rule was grouped by pool.
	for _, expr := range []string{
		`max without (instance) (a) != on () group_left () count(b)`,
		`abs(sum(rate(a[15m])) / sum(rate(b[15m])) - sum(rate(c[15m])) / sum(rate(d[15m]))) > 0.10`,
		`sum by (pod_identifier) (rate(a[5m])) > 0`,
	} {
		r := &recorder{}
		done := make(chan struct{})
		go func() { defer close(done); requireGroupedByPool(r, "test", expr) }()
		<-done
		require.True(t, r.failed, expr)
	}
	requireGroupedByPool(t, "test", `max by (namespace, pool) (a) != on (namespace, pool) count by (namespace, pool) (b)`)
}

// TestAlertRulesGroupByPool checks that no rule mixes the series of two
// pools: every aggregation keeps namespace and pool, every match is on them,
// and every rule's alert carries both labels (checked by the promtool cases,
// which give the expected labels of each firing alert).
func TestAlertRulesGroupByPool(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	readYAML(t, "prometheus/kvroute-alerts.yaml", &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			requireGroupedByPool(t, r.Alert, r.Expr)
		}
	}
}

// TestDashboardFiltersByPool checks the dashboard's variables (datasource,
// namespace, pool), that every panel reads the chosen datasource, that every
// series selector is filtered by the chosen namespace and pool, and that
// every aggregation keeps them apart.
func TestDashboardFiltersByPool(t *testing.T) {
	var dash struct {
		Templating struct {
			List []struct {
				Name, Type string
				Query      any
			}
		}
		Panels []struct {
			Title      string
			Datasource struct{ UID string }
			Targets    []struct{ Expr string }
		}
	}
	b, err := os.ReadFile("grafana/kvroute.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &dash))
	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v.Type
	}
	require.Equal(t, map[string]string{"datasource": "datasource", "namespace": "query", "pool": "query"}, vars)
	const filter = `namespace=~"$namespace", pool=~"$pool"`
	for _, p := range dash.Panels {
		require.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
		for _, tg := range p.Targets {
			requireGroupedByPool(t, p.Title, tg.Expr)
			names := metricNames(tg.Expr)
			selectors := 0
			for _, m := range promSelector.FindAllStringSubmatch(tg.Expr, -1) {
				for _, n := range names {
					if m[1] == n {
						selectors++
						require.True(t, strings.HasPrefix(m[3], filter), "%s: %s is not filtered by namespace and pool", p.Title, m[0])
					}
				}
			}
			require.GreaterOrEqual(t, selectors, len(names), "%s: %s", p.Title, tg.Expr)
		}
	}
}
