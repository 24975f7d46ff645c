package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A metrics request still running when --metrics-shutdown-timeout is up (a
// long /debug/pprof/profile, a scraper that stalls) is cut: its connection
// is closed, so that its handler ends with the picker instead of outliving
// it for as long as the caller keeps the connection open.
func TestStopServersCutsAMetricsRequestPastTheShutdownTimeout(t *testing.T) {
	check := leakcheck.Check(t)
	entered := make(chan struct{})
	ms := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done() // held until the connection goes, as pprof's profile is
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- ms.Serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close() // after the check: the caller keeps its connection open
	_, err = fmt.Fprintf(c, "GET /debug/pprof/profile HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	<-entered
	// The request never ends on its own: the timeout's length does not
	// matter, only that it is given.
	stopServers(grpc.NewServer(), grpc.NewServer(), ms, stopTimeouts{metrics: time.Millisecond})
	require.ErrorIs(t, <-served, http.ErrServerClosed)
	check()
}

// An ext_proc stream still open when --shutdown-timeout is up is cut, so
// that a stream Envoy never ends does not hold the picker's stop.
func TestStopServersCutsAStreamPastTheShutdownTimeout(t *testing.T) {
	check := leakcheck.Check(t)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer()) // Watch: a stream that stays open
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	stream, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = stream.Recv() // the stream is open on the server
	require.NoError(t, err)

	ms := &http.Server{}
	// The stream never ends on its own: the timeout's length does not
	// matter, only that it is given.
	stopServers(gs, grpc.NewServer(), ms, stopTimeouts{grpc: time.Millisecond})
	require.NoError(t, <-served)
	_, err = stream.Recv()
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	require.NoError(t, conn.Close())
	check()
}

// Zero is each stop timeout's default; a negative one is refused.
func TestStopTimeoutFlags(t *testing.T) {
	require.Equal(t, stopTimeouts{grpc: 10 * time.Second, metrics: 5 * time.Second, tracing: 10 * time.Second}, stopTimeouts{}.withDefaults())
	f, err := parseFlags([]string{"--endpoints", "10.0.0.1:8000"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, stopTimeouts{}, f.stop)
	f, err = parseFlags([]string{"--endpoints", "10.0.0.1:8000", "--shutdown-timeout", "1m", "--metrics-shutdown-timeout", "2s", "--tracing-flush-timeout", "3s"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, stopTimeouts{grpc: time.Minute, metrics: 2 * time.Second, tracing: 3 * time.Second}, f.stop)
	require.Equal(t, f.stop, f.stop.withDefaults(), "a given timeout is kept")
	for _, name := range []string{"--shutdown-timeout", "--metrics-shutdown-timeout", "--tracing-flush-timeout"} {
		_, err := parseFlags([]string{"--endpoints", "10.0.0.1:8000", name, "-1s"}, io.Discard)
		require.ErrorContains(t, err, name)
		_, err = parseFlags([]string{"--endpoints", "10.0.0.1:8000", name, "10"}, io.Discard)
		require.ErrorContains(t, err, name[2:], "a duration string, with its unit")
	}
}

// kvroute's chart checks that the pod's grace period covers the picker's
// stop after SIGTERM, reckoned with these defaults where its flags do not
// say: its template states the picker's own.
func TestChartStopDefaultsAreThePickers(t *testing.T) {
	b, err := os.ReadFile("../../../../deploy/helm/kvroute-epp/templates/deployment.yaml")
	require.NoError(t, err)
	line := regexp.MustCompile(`\$stop := dict (.*) -}}`).FindSubmatch(b)
	require.NotNil(t, line, "the template's $stop dict")
	chart := map[string]time.Duration{}
	for _, m := range regexp.MustCompile(`"([a-z-]+)" "([^"]+)"`).FindAllSubmatch(line[1], -1) {
		d, err := time.ParseDuration(string(m[2]))
		require.NoError(t, err)
		chart[string(m[1])] = d
	}
	d := stopTimeouts{}.withDefaults()
	require.Equal(t, map[string]time.Duration{
		"drain-timeout":            defaultDrainTimeout,
		"shutdown-timeout":         d.grpc,
		"metrics-shutdown-timeout": d.metrics,
		"tracing-flush-timeout":    d.tracing,
	}, chart)
}
