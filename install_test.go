package kvroute

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInstallRecipe follows the README's "Install" recipe as a user of an
// unpublished kvroute would: a module outside the repository, its go.mod
// the README's require and replace lines (the clone's path put in), code
// that imports the core and every contrib module, `go mod tidy` and `go
// build` without the workspace and without the network (the module cache
// the workspace's own build filled is enough).
func TestInstallRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module that imports every contrib module")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, install, ok := strings.Cut(string(readme), "\n## Install (as a library)\n")
	require.True(t, ok, "README has an Install section")
	install, _, _ = strings.Cut(install, "\n## ")
	block := regexp.MustCompile("(?s)```go.mod\n(.*?)```").FindStringSubmatch(install)
	require.NotNil(t, block, "the Install section has a go.mod block")
	require.Contains(t, install, "go work use ../kvroute ", "and the workspace recipe")

	root, err := filepath.Abs(".")
	require.NoError(t, err)
	dir := t.TempDir()
	gomod := "module example.com/app\n\ngo 1.26.0\n\n" + strings.ReplaceAll(block[1], "../kvroute", root)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(`package main

import (
	"fmt"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/contrib/k8s"
	"github.com/kvroute/kvroute/contrib/otel/otlpenv"
)

var (
	_ = extproc.New
	_ = k8s.New
	_ = otlpenv.Resolve
	_ = kvroute.New
)

func main() { fmt.Println("ok") }
`), 0o644))
	// Offline first: everything the recipe needs is usually in the module
	// cache already. On a fresh machine "go mod tidy" may want a module only
	// the tests of a dependency import, which no build of this workspace
	// downloaded; then the recipe runs as a user runs it, through the
	// environment's module proxy.
	env := append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod")
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", filepath.Join(dir, "app"), "."}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil && strings.Contains(string(out), "module lookup disabled by GOPROXY=off") {
			env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
			cmd = exec.Command(goBin, args...)
			cmd.Dir, cmd.Env = dir, env
			out, err = cmd.CombinedOutput()
		}
		require.NoError(t, err, "go %v in a module with the README's go.mod:\n%s\n%s", args, gomod, out)
	}
	out, err := exec.Command(filepath.Join(dir, "app")).Output()
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(out))
}
