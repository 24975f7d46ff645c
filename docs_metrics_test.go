package kvroute

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// walkModuleFiles calls fn with the path of every file of the module tree
// (the contrib modules and the examples included), leaving out hidden and
// underscore directories, test data, vendored code and build output.
func walkModuleFiles(fn func(path string) error) error {
	return filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return fn(path)
		}
		name := d.Name()
		if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
			name == "testdata" || name == "vendor" || name == "out") {
			return filepath.SkipDir
		}
		return nil
	})
}

// codeStrings returns every string literal of the non-test Go files of the
// module tree (the contrib modules and the examples included), with the
// directories whose files hold it.
func codeStrings(t *testing.T) map[string]map[string]bool {
	t.Helper()
	lits := map[string]map[string]bool{}
	err := walkModuleFiles(func(path string) error {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					if lits[s] == nil {
						lits[s] = map[string]bool{}
					}
					lits[s][filepath.Dir(path)] = true
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return lits
}

// userDocs returns the documents a user reads: README.md, bench/README.md,
// every other README.md outside test data, and every package's doc.go.
func userDocs(t *testing.T) []string {
	t.Helper()
	var docs []string
	err := walkModuleFiles(func(path string) error {
		if name := filepath.Base(path); name == "README.md" || name == "doc.go" {
			docs = append(docs, path)
		}
		return nil
	})
	require.NoError(t, err)
	return docs
}

// docMetric matches a metric name of kvroute's own families or of the
// llm-d names it exports, with what follows it: a brace expansion of
// several names (kvroute_cluster_sessions_{published,applied}_total) or
// the labels the text gives it (name{reason="memory"}, name{a, b}).
var docMetric = regexp.MustCompile(`\b((?:kvroute|llm_d_epp|simengine)_[a-z0-9_]*)` +
	`(?:\{([a-z0-9_, ]+)\}([a-z0-9_]+)|\{([^{}\n]*)\})?`)

// docLabel matches one label of a metric's braces: its name, and its value
// when the text gives one.
var docLabel = regexp.MustCompile(`^\s*([a-z_][a-z0-9_]*)\s*(?:=\s*"([^"]*)")?\s*$`)

// metricMention is a metric name a document gives, with the labels (name
// to value, "" when the text names the label only) it gives it.
type metricMention struct {
	name   string
	labels map[string]string
}

// docMetricMentions returns the metric names text mentions, brace
// expansions expanded.
func docMetricMentions(text string) []metricMention {
	var out []metricMention
	for _, m := range docMetric.FindAllStringSubmatch(text, -1) {
		switch {
		case m[3] != "": // kvroute_x_{a,b}_total
			for alt := range strings.SplitSeq(m[2], ",") {
				out = append(out, metricMention{name: m[1] + strings.TrimSpace(alt) + m[3]})
			}
		case m[4] != "":
			labels := map[string]string{}
			for l := range strings.SplitSeq(m[4], ",") {
				if lm := docLabel.FindStringSubmatch(l); lm != nil {
					labels[lm[1]] = lm[2]
				}
			}
			out = append(out, metricMention{name: m[1], labels: labels})
		default:
			out = append(out, metricMention{name: m[1]})
		}
	}
	return out
}

// TestDocsNameRealMetrics holds every metric name the user-facing documents
// give (README.md, bench/README.md, the other READMEs and every doc.go) to
// the code: each full name is a string literal of the non-test code (a name
// ending in "_", a family's prefix, starts one), each label it is given is
// a literal in the package that defines the name, and each label value a
// literal of the code ("a|b": each of them). A renamed metric or label that a document still
// names fails with the document and the name.
func TestDocsNameRealMetrics(t *testing.T) {
	lits := codeStrings(t)
	var bad []string
	mentions := 0
	for _, doc := range userDocs(t) {
		src, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range docMetricMentions(string(src)) {
			mentions++
			if strings.HasSuffix(m.name, "_") {
				found := false
				for s := range lits {
					if strings.HasPrefix(s, m.name) && len(s) > len(m.name) {
						found = true
						break
					}
				}
				if !found {
					bad = append(bad, doc+": no metric starts with "+m.name)
				}
				continue
			}
			dirs, ok := lits[m.name]
			if !ok {
				bad = append(bad, doc+": "+m.name+" is no metric of the code")
				continue
			}
			for label, value := range m.labels {
				inPkg := false
				for dir := range lits[label] {
					inPkg = inPkg || dirs[dir]
				}
				if !inPkg {
					bad = append(bad, doc+": "+m.name+" has no label "+label)
				}
				for v := range strings.SplitSeq(value, "|") { // "a|b": either value
					if _, ok := lits[v]; v != "" && !ok {
						bad = append(bad, doc+": "+m.name+"{"+label+"="+strconv.Quote(v)+"}: no such value in the code")
					}
				}
			}
		}
	}
	require.Greater(t, mentions, 200, "the documents name the metrics")
	require.Empty(t, bad, "documents must name the metrics and labels the code exports")
}

// TestDocMetricMentions pins how mentions are read, so that a loosened
// pattern cannot pass the check vacuously.
func TestDocMetricMentions(t *testing.T) {
	got := docMetricMentions("`kvroute_cluster_sessions_{published,applied}_total`, " +
		"`kvroute_kv_index_evictions_total{reason=\"memory\"}` and llm_d_epp_flow_control_queue_size{priority}; " +
		"the kvroute_extproc_* metrics")
	require.Equal(t, []metricMention{
		{name: "kvroute_cluster_sessions_published_total"},
		{name: "kvroute_cluster_sessions_applied_total"},
		{name: "kvroute_kv_index_evictions_total", labels: map[string]string{"reason": "memory"}},
		{name: "llm_d_epp_flow_control_queue_size", labels: map[string]string{"priority": ""}},
		{name: "kvroute_extproc_"},
	}, got)
}

// codeMetricName matches a string literal that is a metric name of
// kvroute's families or of the llm-d names it exports (a series' _sum,
// _count or _bucket suffix aside).
var codeMetricName = regexp.MustCompile(`^(?:kvroute|llm_d_epp)_[a-z0-9_]*[a-z0-9]$`)

// TestMetricsTableIsComplete holds the README's metrics table to its word,
// every metric kvroute exports: each metric name of the non-test code
// (outside bench/, whose tools export nothing) is in the table, one name or
// a brace expansion of several.
func TestMetricsTableIsComplete(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(readme), "\n### Metrics table\n")
	require.True(t, ok, "the README has a metrics table")
	table, _, _ = strings.Cut(table, "\n### ")
	listed := map[string]bool{}
	for _, m := range docMetricMentions(table) {
		listed[m.name] = true
	}
	var missing []string
	for s, dirs := range codeStrings(t) {
		if !codeMetricName.MatchString(s) || listed[s] {
			continue
		}
		if strings.HasSuffix(s, "_sum") || strings.HasSuffix(s, "_count") || strings.HasSuffix(s, "_bucket") {
			continue
		}
		for dir := range dirs {
			if dir != "bench" && !strings.HasPrefix(dir, "bench"+string(filepath.Separator)) {
				missing = append(missing, s+" ("+dir+")")
				break
			}
		}
	}
	slices.Sort(missing)
	require.Greater(t, len(listed), 80, "the table lists the metrics")
	require.Empty(t, missing, "README.md's metrics table must list every metric kvroute exports")
}
