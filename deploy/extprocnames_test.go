package deploy

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// extprocMetricNames returns the metric names contrib/extproc declares
// (the Name of every prometheus *Opts literal in its non-test sources).
// The deploy module does not depend on contrib/extproc and its Envoy
// dependencies, so the names are read from the source that registers them.
func extprocMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../contrib/extproc/*.go")
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast.Inspect(parseGo(t, f), func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "prometheus" {
				return true
			}
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
					v, ok := kv.Value.(*ast.BasicLit)
					require.True(t, ok && v.Kind == token.STRING, "%s: a metric Name that is not a string literal", f)
					name, err := strconv.Unquote(v.Value)
					require.NoError(t, err)
					names[name] = true
				}
			}
			return true
		})
	}
	return names
}

func TestExtprocMetricNames(t *testing.T) {
	names := extprocMetricNames(t)
	for _, want := range []string{"kvroute_extproc_requests_total", "kvroute_extproc_served_fallback_total",
		"kvroute_extproc_served_mismatch_total", "kvroute_extproc_pick_duration_seconds"} {
		require.True(t, names[want], "%s not found in contrib/extproc: %v", want, names)
	}
}
