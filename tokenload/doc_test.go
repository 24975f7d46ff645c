package tokenload

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every exported function of the package is documented by a comment that
// opens with its name, as go doc shows it: NewRequestTable's had been split
// by the declaration of an unexported method, so go doc showed only its
// last line.
func TestExportedFunctionDocsOpenWithTheirName(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	checked := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			checked++
			doc := ""
			if fn.Doc != nil {
				doc = fn.Doc.Text()
			}
			require.True(t, strings.HasPrefix(doc, fn.Name.Name+" "),
				"%s: the doc comment of %s does not open with its name: %q", fset.Position(fn.Pos()), fn.Name.Name, doc)
		}
	}
	require.Greater(t, checked, 20, "the check must see the package's functions")
}
