package kvroute

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docExemptions names the packages excused from the rule that every package
// has a doc.go and a runnable Example, each with the reason it cannot
// comply. An entry without a reason, or for a package that complies or no
// longer exists, fails the check.
var docExemptions = map[string]string{
	"github.com/kvroute/kvroute/examples/quickstart": "the whole program is its main function, which the README " +
		"shows verbatim and which reads the process's flags and serves until interrupted; " +
		"TestQuickstartRoutesALongPromptToTheWarmEngine builds and runs it against simulated engines instead",
}

// packageDocs is what the doc-and-example check learns about one package
// from its files.
type packageDocs struct {
	importPath string
	// hasDocGo reports whether doc.go is among the package's Go files.
	hasDocGo bool
	// commentFiles names the non-test files that carry a package comment.
	commentFiles []string
	// runnable counts the Example functions of the package's tests that
	// have an Output comment, so that go test runs and checks them.
	runnable int
}

// readPackageDocs parses p's Go files for its package comments and its test
// files for Examples.
func readPackageDocs(p listedPackage) (packageDocs, error) {
	d := packageDocs{importPath: p.ImportPath}
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		if name == "doc.go" {
			d.hasDocGo = true
		}
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return d, err
		}
		if f.Doc != nil {
			d.commentFiles = append(d.commentFiles, name)
		}
	}
	var tests []*ast.File
	for _, name := range append(append([]string(nil), p.TestGoFiles...), p.XTestGoFiles...) {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return d, err
		}
		tests = append(tests, f)
	}
	for _, ex := range doc.Examples(tests...) {
		if ex.Output != "" || ex.EmptyOutput {
			d.runnable++
		}
	}
	return d, nil
}

// docViolations holds each package to the rule that it has a doc.go which
// carries its one package comment, and at least one runnable Example (with
// an Output comment), and names every exemption that is unexplained or no
// longer needed.
func docViolations(pkgs []packageDocs, exempt map[string]string) []string {
	var bad []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.importPath] = true
		var miss []string
		if !p.hasDocGo {
			miss = append(miss, "no doc.go")
		}
		switch {
		case len(p.commentFiles) == 0:
			miss = append(miss, "no package comment")
		case len(p.commentFiles) > 1:
			miss = append(miss, "package comment in "+strings.Join(p.commentFiles, ", ")+", not once")
		case p.hasDocGo && p.commentFiles[0] != "doc.go":
			miss = append(miss, "package comment in "+p.commentFiles[0]+", not doc.go")
		}
		if p.runnable == 0 {
			miss = append(miss, "no runnable Example (a func Example with an // Output: comment)")
		}
		reason, exempted := exempt[p.importPath]
		switch {
		case exempted && strings.TrimSpace(reason) == "":
			bad = append(bad, p.importPath+": exempted without a reason")
		case exempted && len(miss) == 0:
			bad = append(bad, p.importPath+": exempted but complies; drop the exemption")
		case !exempted && len(miss) > 0:
			bad = append(bad, p.importPath+": "+strings.Join(miss, "; "))
		}
	}
	for path := range exempt {
		if !seen[path] {
			bad = append(bad, path+": exempted but not a package of the workspace")
		}
	}
	sort.Strings(bad)
	return bad
}

// TestEveryPackageHasDocAndExample holds every package of every workspace
// module to kvroute's standard: a doc.go with the package comment, and a
// runnable Example that go test checks, so that every package's
// documentation opens with what it is for and shows a use that still works.
func TestEveryPackageHasDocAndExample(t *testing.T) {
	var pkgs []packageDocs
	for _, p := range workspacePackages(t) {
		d, err := readPackageDocs(p)
		require.NoError(t, err, p.ImportPath)
		pkgs = append(pkgs, d)
	}
	require.Greater(t, len(pkgs), 50, "the walk must see every package of the workspace")
	if bad := docViolations(pkgs, docExemptions); len(bad) > 0 {
		t.Errorf("every package needs a doc.go with its package comment and a runnable Example:\n%s",
			strings.Join(bad, "\n"))
	}
}

// TestDocViolations pins what the doc-and-example rule catches, so that a
// check that finds nothing cannot pass vacuously.
func TestDocViolations(t *testing.T) {
	pkgs := []packageDocs{
		{importPath: "a", hasDocGo: true, commentFiles: []string{"doc.go"}, runnable: 1},
		{importPath: "b", hasDocGo: false, commentFiles: []string{"main.go"}, runnable: 0},
		{importPath: "c", hasDocGo: true, commentFiles: []string{"doc.go", "c.go"}, runnable: 2},
		{importPath: "d", hasDocGo: true, commentFiles: []string{"d.go"}, runnable: 1},
		{importPath: "e", hasDocGo: true, runnable: 1},
		{importPath: "f", hasDocGo: true, commentFiles: []string{"doc.go"}},
		{importPath: "g", hasDocGo: true, commentFiles: []string{"doc.go"}, runnable: 1},
		{importPath: "h"},
	}
	exempt := map[string]string{"f": "it cannot run", "g": "complies anyway", "h": " ", "z": "gone"}
	require.Equal(t, []string{
		"b: no doc.go; no runnable Example (a func Example with an // Output: comment)",
		"c: package comment in doc.go, c.go, not once",
		"d: package comment in d.go, not doc.go",
		"e: no package comment",
		"g: exempted but complies; drop the exemption",
		"h: exempted without a reason",
		"z: exempted but not a package of the workspace",
	}, docViolations(pkgs, exempt))
}

// TestReadPackageDocs pins that only an Example with an Output comment
// counts as runnable, and that package comments are found in whichever
// file holds them.
func TestReadPackageDocs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600))
	}
	write("doc.go", "// Package p is a fixture.\npackage p\n")
	write("p.go", "// A comment apart from the clause.\n\npackage p\n")
	write("q.go", "// Package p, said twice.\npackage p\n")
	write("p_test.go", "package p\n\nfunc ExampleCompiled() {\n\t_ = 1\n}\n")
	write("x_test.go", "package p_test\n\nfunc ExampleRun() {\n\tprintln()\n\t// Output:\n}\n"+
		"\nfunc ExampleChecked() {\n\tprintln(\"x\")\n\t// Output: x\n}\n")
	p := listedPackage{ImportPath: "p", Dir: dir, GoFiles: []string{"doc.go", "p.go", "q.go"},
		TestGoFiles: []string{"p_test.go"}, XTestGoFiles: []string{"x_test.go"}}
	d, err := readPackageDocs(p)
	require.NoError(t, err)
	require.Equal(t, packageDocs{importPath: "p", hasDocGo: true, commentFiles: []string{"doc.go", "q.go"}, runnable: 2}, d)

	p.GoFiles, p.XTestGoFiles = []string{"p.go"}, nil
	d, err = readPackageDocs(p)
	require.NoError(t, err)
	require.Equal(t, packageDocs{importPath: "p"}, d)
}
