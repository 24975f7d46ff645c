package cliflag

import (
	"bytes"
	"context"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// command is one of kvroute's binaries: its usage's name and a duration
// flag to give a bare number ("" when it has none).
type command struct {
	usage, durationFlag string
}

// commands are every main package of the workspace. A new one must be
// added here, so that it is held to the same command line.
var commands = map[string]command{
	"github.com/kvroute/kvroute/bench/cmd/gwload":                 {"gwload", "duration"},
	"github.com/kvroute/kvroute/bench/cmd/hybridsim":              {"hybridsim", ""},
	"github.com/kvroute/kvroute/bench/cmd/renderload":             {"renderload", "duration"},
	"github.com/kvroute/kvroute/bench/cmd/report":                 {"report", ""},
	"github.com/kvroute/kvroute/bench/cmd/routesim":               {"routesim", "event-delay"},
	"github.com/kvroute/kvroute/cmd/kvroute-gateway":              {"kvroute-gateway", "shutdown-timeout"},
	"github.com/kvroute/kvroute/cmd/kvroute-sidecar":              {"kvroute-sidecar", "prefill-timeout"},
	"github.com/kvroute/kvroute/cmd/simengine":                    {"simengine", "decode-step"},
	"github.com/kvroute/kvroute/contrib/extproc/cmd/epp-demo":     {"epp-demo", ""},
	"github.com/kvroute/kvroute/contrib/extproc/cmd/kvroute-epp":  {"kvroute-epp", "readiness-interval"},
	"github.com/kvroute/kvroute/contrib/otel/cmd/kvroute-gateway": {"kvroute-gateway", "shutdown-timeout"},
	"github.com/kvroute/kvroute/examples/calibrate":               {"calibrate", "timeout"},
	"github.com/kvroute/kvroute/examples/demo":                    {"demo", "interval"},
	"github.com/kvroute/kvroute/examples/quickstart":              {"quickstart", ""},
}

// Every binary of the workspace, built as a user builds it: --help exits 0
// and prints its usage (and does nothing else: epp-demo used to run the
// demo); a duration flag given a bare number fails in one line that says to
// add a unit, without the whole usage; an error names the command once.
func TestEveryCommandHelpExitsZeroAndBadDurationsSayWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every binary of the workspace")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "github.com/kvroute/kvroute/...").Output()
	require.NoError(t, err, "go list: %s", errText(err))
	var mains []string
	for l := range strings.Lines(string(out)) {
		if l = strings.TrimSpace(l); l != "" {
			mains = append(mains, l)
		}
	}
	keys := make([]string, 0, len(commands))
	for k := range commands {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	require.Equal(t, keys, mains, "every main package of the workspace is in the table")

	bins := buildAll(t, goBin, mains)
	for _, pkg := range mains {
		c := commands[pkg]
		t.Run(strings.TrimPrefix(pkg, "github.com/kvroute/kvroute/"), func(t *testing.T) {
			bin := bins[pkg]
			stdout, stderr, code := runCmd(t, bin, "--help")
			require.Equal(t, 0, code, "--help exits 0; stderr: %s", stderr)
			usage := stdout + stderr
			require.Contains(t, usage, "Usage")
			require.Contains(t, usage, c.usage)
			require.Contains(t, usage, "-", "the usage lists the flags")

			if c.durationFlag == "" {
				return
			}
			stdout, stderr, code = runCmd(t, bin, "-"+c.durationFlag, "30")
			require.Equal(t, 1, code, "stdout: %s\nstderr: %s", stdout, stderr)
			require.Equal(t, c.usage+`: -`+c.durationFlag+` "30": a duration needs a unit, e.g. 30s (units: ns, us, ms, s, m, h)`+"\n", stderr)
			require.Empty(t, stdout)
		})
	}
}

// buildAll builds the main packages as a user builds them, each into a
// binary named as go build names it, and returns each one's path. One go
// build per output folder links the binaries in parallel (a build per
// binary, one after another, took minutes on a 2-core machine); main
// packages with the same base name (the two kvroute-gateways) go to
// folders of their own.
func buildAll(t *testing.T, goBin string, mains []string) map[string]string {
	t.Helper()
	var groups [][]string // the k-th main of each base name goes to group k
	seen := map[string]int{}
	for _, pkg := range mains {
		k := seen[path.Base(pkg)]
		seen[path.Base(pkg)]++
		if k == len(groups) {
			groups = append(groups, nil)
		}
		groups[k] = append(groups[k], pkg)
	}
	bins := make(map[string]string, len(mains))
	for _, g := range groups {
		dir := t.TempDir()
		b, err := exec.Command(goBin, append([]string{"build", "-o", dir + string(filepath.Separator)}, g...)...).CombinedOutput()
		require.NoError(t, err, "go build: %s", b)
		for _, pkg := range g {
			bins[pkg] = filepath.Join(dir, path.Base(pkg))
		}
	}
	return bins
}

// runCmd runs bin with args and returns its output and exit status.
func runCmd(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "%s %v did not return", bin, args)
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	}
	require.NoError(t, err)
	return o.String(), e.String(), 0
}

func errText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	if err != nil {
		return err.Error()
	}
	return ""
}
