package kvroute

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// examplesPath is the import path of the examples tree: programs a user
// copies, which nothing else may depend on.
const examplesPath = "github.com/kvroute/kvroute/examples"

// listedPackage is the part of `go list -json` the layout checks read.
type listedPackage struct {
	ImportPath   string
	Name         string
	Dir          string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// underExamples reports whether path is the examples tree or inside it.
func underExamples(path string) bool {
	return path == examplesPath || strings.HasPrefix(path, examplesPath+"/")
}

// layoutViolations holds pkgs to the examples rule: a package outside
// examples/ (library, command or test) imports nothing under examples/, and
// every package under examples/ is a program (package main), not a library.
func layoutViolations(pkgs []listedPackage) []string {
	var bad []string
	for _, p := range pkgs {
		if underExamples(p.ImportPath) {
			if p.Name != "main" {
				bad = append(bad, p.ImportPath+" is package "+p.Name+": examples/ holds programs only")
			}
			continue
		}
		reported := map[string]bool{} // an import of both the package and its tests, once
		for _, imports := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			for _, imp := range imports {
				if underExamples(imp) && !reported[imp] {
					reported[imp] = true
					bad = append(bad, p.ImportPath+" imports "+imp)
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// goList runs `go list -e -json` on every package of the module in dir.
func goList(t *testing.T, goBin, dir string) []listedPackage {
	t.Helper()
	cmd := exec.Command(goBin, "list", "-e", "-json=ImportPath,Name,Dir,GoFiles,TestGoFiles,XTestGoFiles,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list in %s: %s", dir, stderr.String())
	var pkgs []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// workspaceModules returns the go command and the folder of every module of
// the workspace (the root module alone when there is no go.work).
func workspaceModules(t *testing.T) (goBin string, dirs []string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the layout checks list packages with the go command")
	out, err := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}").Output()
	require.NoError(t, err)
	dirs = strings.Fields(string(out))
	require.NotEmpty(t, dirs)
	return goBin, dirs
}

// workspacePackages lists every package of every module of the workspace
// with go list.
func workspacePackages(t *testing.T) []listedPackage {
	t.Helper()
	goBin, dirs := workspaceModules(t)
	var pkgs []listedPackage
	for _, dir := range dirs {
		pkgs = append(pkgs, goList(t, goBin, dir)...)
	}
	return pkgs
}

// TestNothingImportsExamples walks every package of every module of the
// workspace: the simulated engine, the gateway and the end-to-end suite are
// packages of their own, and no library, command or test outside examples/
// may depend on the example programs.
func TestNothingImportsExamples(t *testing.T) {
	pkgs := workspacePackages(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.ImportPath] = true
	}
	for _, want := range []string{"github.com/kvroute/kvroute/simengine", "github.com/kvroute/kvroute/gateway",
		"github.com/kvroute/kvroute/e2e", examplesPath + "/demo"} {
		require.True(t, seen[want], "the walk must see %s", want)
	}
	bad := layoutViolations(pkgs)
	require.Empty(t, bad, "packages outside examples/ must not depend on it:\n%s", strings.Join(bad, "\n"))
}

// TestLayoutViolations pins what the examples rule catches, so that a
// check that lists nothing cannot pass vacuously.
func TestLayoutViolations(t *testing.T) {
	pkgs := []listedPackage{
		{ImportPath: "github.com/kvroute/kvroute/cluster", Name: "cluster", Imports: []string{examplesPath + "/simengine/engine"},
			TestImports: []string{examplesPath + "/simengine/engine"}},
		{ImportPath: "github.com/kvroute/kvroute/bench/cmd/gwload", Name: "main", Imports: []string{examplesPath + "/gateway/proxy"}},
		{ImportPath: "github.com/kvroute/kvroute/gateway", Name: "gateway", XTestImports: []string{examplesPath}},
		{ImportPath: examplesPath + "/demo/scenario", Name: "scenario"},
		{ImportPath: examplesPath + "/demo", Name: "main", Imports: []string{"github.com/kvroute/kvroute/e2e"}},
		{ImportPath: "github.com/kvroute/kvroute/e2e", Name: "e2e", Imports: []string{"github.com/kvroute/kvroute/examplesque"}},
	}
	require.Equal(t, []string{
		"github.com/kvroute/kvroute/bench/cmd/gwload imports " + examplesPath + "/gateway/proxy",
		"github.com/kvroute/kvroute/cluster imports " + examplesPath + "/simengine/engine",
		examplesPath + "/demo/scenario is package scenario: examples/ holds programs only",
		"github.com/kvroute/kvroute/gateway imports " + examplesPath,
	}, layoutViolations(pkgs))
}
