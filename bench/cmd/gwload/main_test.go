package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/bench/internal/outdir"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
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
		// A NaN or infinite rate made every publisher owe 2^63 messages
		// at the first tick, a send loop that outlived -fleet-duration.
		{"-fleet", "1", "-fleet-rate", "NaN"}, {"-fleet", "1", "-fleet-rate", "inf"},
	} {
		_, err := parseFlags(args, &bytes.Buffer{})
		require.Error(t, err, "%q", args)
	}
	o, err := parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, []int{4, 16, 64, 256}, o.conc)
	require.Equal(t, []string{targetDirect, targetPrecise, targetRoundRobin}, o.targets)
	require.Equal(t, "", o.out, "the module root's out/gwload")
	dir, err := outdir.Resolve("", DefaultOut)
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
		"-prefix-tokens", "200", "-targets", "direct,precise,round-robin,round-robin-exchange"}, &stdout, &bytes.Buffer{})
	require.NoError(t, err)
	md, err := os.ReadFile(filepath.Join(out, "gwload.md"))
	require.NoError(t, err)
	require.Equal(t, stdout.String(), string(md))
	for _, target := range []string{targetDirect, targetPrecise, targetRoundRobin, targetRoundRobinExchange} {
		var row string
		for line := range strings.SplitSeq(string(md), "\n") {
			if row == "" && strings.HasPrefix(line, "| "+target+" | 2 |") {
				row = line
			}
		}
		require.NotEmpty(t, row, "no %s row in\n%s", target, md)
		f := strings.Split(row, "|")
		require.Len(t, f, 20, row)
		require.Equal(t, " 0 ", f[7], "errors in %s", row)
		require.NotEqual(t, " 0 ", f[4], "no requests/s in %s", row)
		// New connections may still open while the pools grow, 100 ms after
		// the start; no connection that was there before the window closes
		// (a render hedge's loser canceled before its request was sent,
		// which a CPU-starved gateway does, gives its connection back).
		// A pool still growing can close a connection it dialed in the
		// window: net/http dials for a request that waits, an idle
		// connection may serve it first, and the new one is surplus. So at
		// most as many close as opened; the steady state itself (none open,
		// none close) is the gateway's TestEngineConnectionsAreNotChurned
		// AtSteadyState. The TIME_WAIT count is machine-wide: an earlier
		// socket on a reused port number expiring in the window makes it
		// negative, so only a positive change means a connection closed.
		tw, err := strconv.Atoi(strings.TrimSpace(f[17]))
		require.NoError(t, err, row)
		opened, err := strconv.Atoi(strings.TrimSpace(f[16]))
		require.NoError(t, err, row)
		require.LessOrEqual(t, tw, opened, "connections to the engines closed that the window did not open, in %s", row)
		// The engines' own count of the connections closed, by side, is
		// exact: no more close than opened, and the engines close none.
		byClient, byEngine, ok := strings.Cut(strings.TrimSpace(f[18]), " / ")
		require.True(t, ok, row)
		nc, err := strconv.Atoi(byClient)
		require.NoError(t, err, row)
		require.LessOrEqual(t, nc, opened, "connections closed that the window did not open, in %s", row)
		require.Equal(t, "0", byEngine, "connections the engines closed, in %s", row)
		switch target {
		case targetPrecise:
			// The render share is computed. Whether a 300 ms window's ~20
			// profile samples land in render is chance on a loaded machine,
			// so its size is not asserted here; the attribution itself has
			// its own test on a synthetic profile.
			require.NotEqual(t, " — ", f[9], "no render share in %s", row)
		case targetRoundRobin, targetRoundRobinExchange:
			require.Equal(t, " 0 % ", f[9], "round-robin renders nothing: %s", row)
		}
	}
	for _, target := range []string{targetPrecise, targetRoundRobin} {
		for _, suffix := range []string{".pprof", ".allocs0.pb.gz", ".allocs1.pb.gz"} {
			require.FileExists(t, filepath.Join(out, "gateway-"+target+"-c2"+suffix))
		}
	}
}

// profileShare splits a real CPU profile by pprof label and by stack: CPU burnt under the
// render label and outside it both show, and the labelled share is what
// was burnt labelled (loosely: the profiler samples at 100 Hz on a busy
// machine).
func TestLabelShareSplitsAProfileByLabel(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, pprof.StartCPUProfile(&buf))
	// burn spends a fixed amount of CPU work (about 150 ms on an idle
	// core), not a span of wall time: on a loaded machine a timed burn may
	// get no CPU, and so no samples, at all. It never reads the clock: a
	// sample taken inside the clock's vDSO call may come without a usable
	// stack.
	var sink uint64
	burn := func() {
		for range 7500 {
			x := sink
			for i := range 20000 {
				x = x*6364136223846793005 + uint64(i)
			}
			sink = x
		}
	}
	burn()
	ctx, span := renderLabeler{}.Tracer(render.TracerName).Start(context.Background(), render.SpanRender)
	burn()
	done := make(chan struct{})
	go func() { burn(); close(done) }() // inherits the label
	<-done
	span.End()
	_ = ctx
	burn()
	pprof.StopCPUProfile()
	total, lab, err := profileShare(bytes.NewReader(buf.Bytes()), stageLabel, stageRender, "")
	require.NoError(t, err)
	require.Positive(t, lab, "labelled CPU")
	require.Greater(t, total, lab, "unlabelled CPU")
	share := float64(lab) / float64(total)
	require.InDelta(t, 0.5, share, 0.3, "half the CPU was burnt labelled")
	require.Nil(t, renderLabeler{}.Tracer("github.com/kvroute/kvroute"), "the router runs untraced")
	// By stack: the burn function is on every sample's stack.
	total2, all, err := profileShare(bytes.NewReader(buf.Bytes()), "none", "none", "github.com/kvroute/kvroute/bench/cmd/gwload.TestLabelShareSplitsAProfileByLabel")
	require.NoError(t, err)
	require.Equal(t, total, total2)
	require.Positive(t, all)
	// Every labelled sample burnt in this test's closure; other samples
	// (GC, the profiler, the race runtime) may be neither.
	require.GreaterOrEqual(t, all, lab, "the test function is on every labelled sample's stack")
	_, _, err = profileShare(bytes.NewReader([]byte("not a profile")), stageLabel, stageRender, "")
	require.Error(t, err)
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
	require.Equal(t, "127.0.0.1:8080", procAddr("0100007F:1F90"))
}
