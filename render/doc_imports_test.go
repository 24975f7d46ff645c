package render

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The package doc lists what render imports from kvroute; a package the
// code imports and the list leaves out makes the list a false promise.
func TestDocNamesEveryKvrouteImport(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	_, list, ok := strings.Cut(string(doc), "The package imports nothing else from kvroute but")
	require.True(t, ok, "doc.go states what the package imports from kvroute")
	list, _, _ = strings.Cut(list, "package render")
	list = strings.Join(strings.Fields(strings.ReplaceAll(list, "//", "")), " ")

	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	const module = "github.com/kvroute/kvroute/"
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			name, ok := strings.CutPrefix(path, module)
			if !ok {
				continue
			}
			require.True(t, strings.Contains(list, name+" "), "%s imports %s, which doc.go's list of kvroute imports leaves out", f, name)
		}
	}
}
