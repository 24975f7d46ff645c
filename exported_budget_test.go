package kvroute

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exportedBudget is the most exported identifiers each package may have:
// the root holds the routing pipeline and kvevents the applier, pool and
// stream; anything else belongs in a package of its own.
var exportedBudget = map[string]int{
	".":        66,
	"kvevents": 56,
}

// exportedCount counts the exported identifiers of the package in dir (its
// non-test files): package-level types, functions, constants and variables,
// and the exported methods of exported types. Exported methods of
// unexported types are not part of the package's API and are not counted,
// nor are the JSON methods (interfaceMethods) every configuration type has
// by the configuration convention: they add no job to the package.
func exportedCount(t *testing.T, dir string) int {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	n, pkg := 0, ""
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		require.NoError(t, err)
		if pkg == "" {
			pkg = f.Name.Name
		}
		require.Equal(t, pkg, f.Name.Name, "one package in %s", dir)
		for _, d := range f.Decls {
			n += exportedIn(d)
		}
	}
	return n
}

// exportedIn counts the exported identifiers one declaration adds, by
// exportedCount's rules.
func exportedIn(d ast.Decl) int {
	n := 0
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Name.IsExported() && (d.Recv == nil || receiverExported(d.Recv) && !interfaceMethods[d.Name.Name]) {
			n++
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					n++
				}
			case *ast.ValueSpec:
				for _, id := range s.Names {
					if id.IsExported() {
						n++
					}
				}
			}
		}
	}
	return n
}

// interfaceMethods are the methods not counted: encoding/json's, which
// decode and encode a configuration type by kvroute's convention.
var interfaceMethods = map[string]bool{"MarshalJSON": true, "UnmarshalJSON": true}

// receiverExported reports whether a method's receiver type is exported.
func receiverExported(fl *ast.FieldList) bool {
	t := fl.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return true
		}
	}
}

// TestExportedIdentifierBudget keeps the root package the pipeline and
// kvevents the event stream: each stays within its budget of exported
// identifiers (go test -v -run ExportedIdentifierBudget prints the counts).
func TestExportedIdentifierBudget(t *testing.T) {
	for dir, budget := range exportedBudget {
		n := exportedCount(t, dir)
		t.Logf("%s: %d exported identifiers (budget %d)", dir, n, budget)
		require.LessOrEqual(t, n, budget, "package %s exports too much; give the new job a package of its own", dir)
	}
}
