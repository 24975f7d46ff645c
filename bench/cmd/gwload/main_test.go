package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// TestMain lets the test binary serve as gwload's child processes.
func TestMain(m *testing.M) {
	if ok, err := runRole(); ok {
		if err != nil {
			os.Stderr.WriteString("gwload child: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParseFlagsRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"-concurrency", "4,x"}, {"-concurrency", "0"}, {"-targets", "nope"}, {"-duration", "0s"},
		{"-prefix-tokens", "0"}, {"-fleet", "-1"}, {"extra"},
	} {
		_, err := parseFlags(args, &bytes.Buffer{})
		require.Error(t, err, "%q", args)
	}
	o, err := parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, []int{4, 16, 64, 256}, o.conc)
	require.Equal(t, []string{targetDirect, targetPrecise, targetRoundRobin}, o.targets)
	require.Equal(t, "", o.out, "the module root's out/gwload")
	dir, err := outputDir("")
	require.NoError(t, err)
	require.Equal(t, filepath.Join("out", "gwload"), filepath.Join(filepath.Base(filepath.Dir(dir)), filepath.Base(dir)))
}

// A short run of every target against real engine and gateway processes
// completes requests without errors or closed engine connections, and
// writes the table and the gateway's profile.
func TestRunMeasuresEveryTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four processes and runs load for a few seconds")
	}
	defer leakcheck.Check(t)()
	out := t.TempDir()
	var stdout bytes.Buffer
	err := run([]string{"-out", out, "-concurrency", "2", "-duration", "300ms", "-warmup", "100ms",
		"-prefix-tokens", "200", "-profile", "2"}, &stdout, &bytes.Buffer{})
	require.NoError(t, err)
	md, err := os.ReadFile(filepath.Join(out, "gwload.md"))
	require.NoError(t, err)
	require.Equal(t, stdout.String(), string(md))
	for _, target := range []string{targetDirect, targetPrecise, targetRoundRobin} {
		var row string
		for line := range strings.SplitSeq(string(md), "\n") {
			if row == "" && strings.HasPrefix(line, "| "+target+" | 2 |") {
				row = line
			}
		}
		require.NotEmpty(t, row, "no %s row in\n%s", target, md)
		f := strings.Split(row, "|")
		require.Equal(t, " 0 ", f[6], "errors in %s", row)
		require.NotEqual(t, " 0 ", f[3], "no requests/s in %s", row)
		// New connections may still open while the pools grow; none close.
		require.Equal(t, " 0 ", f[11], "connections to the engines closed in %s", row)
	}
	require.FileExists(t, filepath.Join(out, "gateway-precise-c2.pprof"))
}

func TestProcCPUAndRSSReadThisProcess(t *testing.T) {
	c0, err := procCPU("self")
	require.NoError(t, err)
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	c1, err := procCPU("self")
	require.NoError(t, err)
	require.GreaterOrEqual(t, c1, c0)
	rss, err := rssBytes("self")
	require.NoError(t, err)
	require.Positive(t, rss)
	require.Equal(t, 8080, hexPort("0100007F:1F90"))
}
