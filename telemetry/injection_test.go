package telemetry

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// dependencyTypes are the types a Set carries, as a field's type reads in
// source.
var dependencyTypes = map[string]bool{
	"prometheus.Registerer": true,
	"*slog.Logger":          true,
	"trace.TracerProvider":  true,
	"telemetry.Clock":       true,
}

// ownFields are the exported fields that carry a dependency outside a Set,
// each with the reason it is not the Set's.
var ownFields = map[string]string{
	// A binary's Run builds its registry and logger from its own flags and
	// serves that registry on /metrics; a host adds only a tracer provider.
	"gateway/gatewaycmd.Options.TracerProvider": "the binary's own",
	// The simulated vLLM server serves its registry on /metrics, so it
	// takes a *prometheus.Registry, not a Set's Registerer, and its
	// logger and publisher clock beside it.
	"simengine/server.Options.Logger": "serves its own registry",
	"simengine/server.Options.Clock":  "serves its own registry",
	// The demo harness logs only.
	"e2e.Options.Logger": "a demo harness's log",
}

// TestDependenciesComeInASet: every exported struct of kvroute's packages
// (every workspace module, internal packages aside) that takes a
// registerer, a logger, a tracer provider or a clock takes it the one way
// package telemetry describes, in an embedded Set, not as a field of its
// own beside or instead of one.
func TestDependenciesComeInASet(t *testing.T) {
	var bad []string
	seen := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "internal" || name == "telemetry") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(strings.TrimPrefix(filepath.Dir(path), ".."+string(filepath.Separator)))
		if filepath.Dir(path) == ".." {
			pkg = "kvroute"
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok || !ts.Name.IsExported() {
					continue
				}
				for _, fld := range st.Fields.List {
					if !dependencyTypes[typeString(fld.Type)] {
						continue
					}
					for _, n := range fld.Names {
						key := pkg + "." + ts.Name.Name + "." + n.Name
						seen[key] = true
						if n.IsExported() && ownFields[key] == "" {
							bad = append(bad, key+" ("+typeString(fld.Type)+")")
						}
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(bad)
	require.Empty(t, bad, "embed a telemetry.Set instead")
	for key := range ownFields {
		require.True(t, seen[key], "%s is listed as an exception but no longer exists", key)
	}
}

// typeString renders a field type of the forms dependencyTypes lists.
func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + typeString(e.X)
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return x.Name + "." + e.Sel.Name
		}
	}
	return ""
}
