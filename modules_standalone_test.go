package kvroute

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryModuleResolvesItsImportsAlone lists, outside the workspace
// (GOWORK=off), every package of every module of the workspace with its
// tests and their dependencies: each import must be provided by the
// module's own go.mod. Inside the workspace a module borrows the others'
// requirements, so a core test that imported a Kubernetes package (which
// only the contrib modules require) built here and failed for a user who
// fetched the core module alone. go list reads no code, so this costs well
// under a second a module.
func TestEveryModuleResolvesItsImportsAlone(t *testing.T) {
	goBin, dirs := workspaceModules(t)
	var bad []string
	for _, dir := range dirs {
		cmd := exec.Command(goBin, "list", "-e", "-test", "-deps",
			"-f", `{{with .Error}}{{$.ImportPath}}: {{.}}{{"\n"}}{{end}}`, "./...")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "go list in %s: %s", dir, stderr.String())
		for l := range strings.Lines(string(out)) {
			if l = strings.TrimSpace(l); l != "" {
				bad = append(bad, dir+": "+l)
			}
		}
	}
	require.Empty(t, bad, "imports a module's own go.mod does not provide (go get them there, or import what the module already requires)")
}
