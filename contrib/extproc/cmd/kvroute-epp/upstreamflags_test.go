package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// upstreamArgs are the Inference Extension picker's flags beyond its
// manifests' (cmd/lwepp with pkg/lwepp/server's Options and
// controller-runtime's zap flags), as an operator may pass them.
var upstreamArgs = []string{"--endpoint-target-ports", "8000,8001", "--health-checking", "--zap-devel",
	"--zap-stacktrace-level", "error", "--zap-time-encoding", "iso8601", "--zap-log-level", "debug"}

// kvroute-epp starts with every flag of the Inference Extension picker:
// --zap-log-level sets the log level, and the flags that cannot apply are
// listed to be logged.
func TestFlagsAcceptTheInferenceExtensionPickerFlags(t *testing.T) {
	f, err := parseFlags(append([]string{"--pool-name", "p"}, upstreamArgs...), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "debug", f.logLevel)
	require.True(t, f.healthChecking)
	require.Equal(t, []string{"endpoint-target-ports", "zap-devel", "zap-stacktrace-level", "zap-time-encoding"}, f.ignored)

	f, err = parseFlags([]string{"--pool-name", "p"}, io.Discard)
	require.NoError(t, err)
	require.Empty(t, f.ignored)
	require.True(t, f.healthChecking, "kvroute-epp serves health on the ext_proc port by default, as it always has")

	for s, want := range map[string]slog.Level{"debug": slog.LevelDebug, "INFO": slog.LevelInfo, "error": slog.LevelError, "panic": slog.LevelError + 4, "3": slog.LevelDebug} {
		f, err := parseFlags([]string{"--pool-name", "p", "--zap-log-level", s}, io.Discard)
		require.NoError(t, err, s)
		var lvl slog.Level
		require.NoError(t, lvl.UnmarshalText([]byte(f.logLevel)), s)
		require.Equal(t, want, lvl, s)
	}
}

// Values the upstream picker refuses are refused, naming the flag.
func TestUpstreamFlagsRefuseBadValues(t *testing.T) {
	for _, args := range [][]string{
		{"--endpoint-target-ports", "0"},
		{"--endpoint-target-ports", "8000, 8001"},
		{"--endpoint-target-ports", "65536"},
		{"--zap-log-level", "0"},
		{"--zap-log-level", "verbose"},
		{"--zap-stacktrace-level", "debug"},
		{"--zap-time-encoding", "unix"},
		{"--health-checking=maybe"},
	} {
		_, err := parseFlags(append([]string{"--pool-name", "p"}, args...), io.Discard)
		require.ErrorContains(t, err, strings.SplitN(args[0], "=", 2)[0][1:], args)
	}
}

// Each ignored flag is logged once at start, with why.
func TestIgnoredUpstreamFlagsAreLogged(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("model: "+model+"\nblockSize: 16\nevents:\n  enabled: false\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // run starts, then stops at once
	var stderr bytes.Buffer
	args := append([]string{"--endpoints", "127.0.0.1:1", "--config", cfgPath, "--listen-host", "127.0.0.1", "--grpc-port", "0",
		"--grpc-health-port", "0", "--metrics-port", "0", "--drain-timeout=0"}, upstreamArgs...)
	require.NoError(t, run(ctx, args, io.Discard, &stderr))
	for name, why := range ignoredFlags {
		require.Equal(t, 1, strings.Count(stderr.String(), "flag=--"+name+" "), stderr.String())
		require.Contains(t, stderr.String(), why[:20])
	}
}

// --health-checking=false leaves only the ext_proc service on the ext_proc
// port; by default the health service answers there too. The health port
// serves it either way.
func TestHealthCheckingFlag(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	check := func(addr string) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: extproc.ExtProcService})
		return err
	}
	on := startEPPWith(t)
	require.NoError(t, check(on[1]))
	off := startEPPWith(t, "--health-checking=false")
	require.Equal(t, codes.Unimplemented, status.Code(check(off[1])))
	require.NoError(t, check(off[2]))
}
