package kvroute

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// codeMetricDef is what the code says of one metric: its kinds (counter,
// gauge, histogram, summary: the prometheus Opts it is built with) and, when
// every one is a literal, its label names (a Vec's and constant ones).
type codeMetricDef struct {
	kinds  map[string]bool
	labels []string // nil: not all literal, or built more than once
}

// codeMetricDefs returns the metrics the non-test code builds from a
// prometheus Opts literal whose Name is a string literal or constant.
func codeMetricDefs(t *testing.T) map[string]*codeMetricDef {
	t.Helper()
	consts := map[string]string{}
	type built struct {
		opts   *ast.CompositeLit
		kind   string
		labels ast.Expr // a New*Vec's label names, or nil
	}
	var all []built
	err := walkModuleFiles(func(path string) error {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		vecOpts := map[*ast.CompositeLit]ast.Expr{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[id.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && strings.HasSuffix(sel.Sel.Name, "Vec") && len(n.Args) == 2 {
					if opts, ok := n.Args[0].(*ast.CompositeLit); ok {
						vecOpts[opts] = n.Args[1]
					}
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok {
					switch sel.Sel.Name {
					case "CounterOpts", "GaugeOpts", "HistogramOpts", "SummaryOpts":
						all = append(all, built{opts: n, kind: strings.ToLower(strings.TrimSuffix(sel.Sel.Name, "Opts"))})
					}
				}
			}
			return true
		})
		for i := range all {
			if l, ok := vecOpts[all[i].opts]; ok {
				all[i].labels = l
			}
		}
		return nil
	})
	require.NoError(t, err)
	str := func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(e.Value)
			return s, err == nil && e.Kind == token.STRING
		case *ast.Ident:
			s, ok := consts[e.Name]
			return s, ok
		}
		return "", false
	}
	defs := map[string]*codeMetricDef{}
	for _, b := range all {
		var name string
		labels, literal := []string{}, true
		for _, e := range b.opts.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			switch key, _ := kv.Key.(*ast.Ident); {
			case key == nil:
			case key.Name == "Name":
				name, _ = str(kv.Value)
			case key.Name == "ConstLabels":
				m, ok := kv.Value.(*ast.CompositeLit)
				if !ok {
					literal = false
					continue
				}
				for _, le := range m.Elts {
					lkv, ok := le.(*ast.KeyValueExpr)
					if !ok {
						literal = false
						continue
					}
					l, ok := str(lkv.Key)
					literal = literal && ok
					labels = append(labels, l)
				}
			}
		}
		if b.labels != nil {
			if m, ok := b.labels.(*ast.CompositeLit); ok {
				for _, le := range m.Elts {
					l, ok := str(le)
					literal = literal && ok
					labels = append(labels, l)
				}
			} else {
				literal = false
			}
		}
		if name == "" {
			continue
		}
		d := defs[name]
		if d == nil {
			d = &codeMetricDef{kinds: map[string]bool{}, labels: labels}
			defs[name] = d
		} else if !slices.Equal(slices.Sorted(slices.Values(d.labels)), slices.Sorted(slices.Values(labels))) {
			literal = false
		}
		d.kinds[b.kind] = true
		if !literal {
			d.labels = nil
		}
	}
	return defs
}

// setLabels are the labels the metrics table gives that no Opts holds:
// kvroute-epp adds them as constant labels of a whole registerer
// (telemetry.Set.With), with where.
var setLabels = map[string]string{
	"discovery": "kvroute-epp's two Kubernetes discoveries, pool and render",
}

// metricsTableRow matches a row of the README's metrics table: its metric
// names, type and labels.
var metricsTableRow = regexp.MustCompile("(?m)^\\| (`.*?) \\| (.*?) \\| (.*?) \\| .*\\|$")

// backquotedLabel matches a label name in backquotes.
var backquotedLabel = regexp.MustCompile("`([a-z_][a-z0-9_]*)`")

// TestMetricsTableTypesAndLabels holds the README's metrics table to the
// code for every metric built from a prometheus Opts literal: the type
// column is the Opts' kind, and the labels column names every label the
// code gives it (a Vec's, constant ones) and no other, setLabels aside.
func TestMetricsTableTypesAndLabels(t *testing.T) {
	defs := codeMetricDefs(t)
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(readme), "\n### Metrics table\n")
	require.True(t, ok, "the README has a metrics table")
	table, _, _ = strings.Cut(table, "\n### ")
	var bad []string
	checked := 0
	for _, row := range metricsTableRow.FindAllStringSubmatch(table, -1) {
		kind, _, _ := strings.Cut(row[2], " ")
		var labels []string
		for _, m := range backquotedLabel.FindAllStringSubmatch(row[3], -1) {
			labels = append(labels, m[1])
		}
		for _, m := range docMetricMentions(row[1]) {
			d, ok := defs[m.name]
			if !ok {
				continue
			}
			checked++
			if !d.kinds[kind] {
				bad = append(bad, m.name+": the table says "+kind+", the code builds "+strings.Join(slices.Sorted(maps.Keys(d.kinds)), ", "))
			}
			if d.labels == nil {
				continue
			}
			for _, l := range d.labels {
				if !slices.Contains(labels, l) {
					bad = append(bad, m.name+": the table leaves out its label "+l)
				}
			}
			for _, l := range labels {
				if !slices.Contains(d.labels, l) && setLabels[l] == "" {
					bad = append(bad, m.name+": the table gives it a label "+l+" the code does not")
				}
			}
		}
	}
	require.Greater(t, checked, 100, "the table's metrics are found in the code")
	require.Empty(t, bad, "README.md's metrics table must give each metric's type and labels as the code builds it")
}
