package main

import (
	"context"
	"crypto/tls"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
	"github.com/kvroute/kvroute/telemetry"
)

// process opens an ext_proc stream to addr, sends a completion request's
// headers and a body of bodyBytes, and returns the error of the answers
// until the body's, or the body's answer's immediate response (nil when
// the request was routed).
func process(t *testing.T, ctx context.Context, addr string, bodyBytes int) (*extprocv3.ImmediateResponse, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	stream, err := extprocv3.NewExternalProcessorClient(conn).Process(ctx)
	if err != nil {
		return nil, err
	}
	hv := func(k, v string) *corev3.HeaderValue { return &corev3.HeaderValue{Key: k, RawValue: []byte(v)} }
	body := `{"model":"` + model + `","prompt":"` + strings.Repeat("x", max(0, bodyBytes-40)) + `"}`
	for _, req := range []*extprocv3.ProcessingRequest{
		{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{hv(":method", "POST"), hv(":path", "/v1/completions"),
				hv(":authority", "gateway"), hv("content-type", "application/json")}}}}},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: true}}},
	} {
		if err := stream.Send(req); err != nil {
			break // the answer says why
		}
	}
	for {
		resp, err := stream.Recv()
		if err != nil || resp.GetImmediateResponse() != nil {
			return resp.GetImmediateResponse(), err
		}
		if resp.GetRequestBody() != nil {
			return nil, nil
		}
	}
}

// After SIGTERM, health turns NOT_SERVING at once and ext_proc keeps
// serving new streams for --drain-timeout, as llm-d's router EPP does;
// then kvroute-epp stops.
func TestDrainTimeoutKeepsServingExtProc(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	clock := telemetry.NewManual(time.Unix(1e9, 0))
	old := drainClock
	drainClock = clock
	t.Cleanup(func() { drainClock = old })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, done := startEPP(t, ctx, "--endpoints", "127.0.0.1:1", "--config", configFile(t), "--drain-timeout", "1h")

	hconn, err := grpc.NewClient(m[2], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer hconn.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	cancel() // SIGTERM
	require.Eventually(t, func() bool {
		resp, err := healthpb.NewHealthClient(hconn).Check(rctx, &healthpb.HealthCheckRequest{Service: extproc.ReadinessService})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING
	}, 20*time.Second, 10*time.Millisecond, "health turns NOT_SERVING and the health port stays up")
	imm, err := process(t, rctx, m[1], 64)
	require.NoError(t, err)
	require.Nil(t, imm, "a request sent during the drain window is routed")

	clock.WaitForWaiters(1)
	clock.Advance(time.Hour)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-rctx.Done():
		t.Fatal("kvroute-epp did not stop at the end of the drain window")
	}
	_, err = parseFlags([]string{"--pool-name", "p", "--drain-timeout", "-1s"}, io.Discard)
	require.ErrorContains(t, err, "--drain-timeout -1s is negative")
	f, err := parseFlags([]string{"--pool-name", "p"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, f.llmdServer.drainTimeout, "llm-d's default")
}

// configFile writes a kvroute configuration without KV events.
func configFile(t *testing.T) string {
	t.Helper()
	path := t.TempDir() + "/config.yaml"
	require.NoError(t, writeFile(path, "model: "+model+"\nblockSize: 16\nevents:\n  enabled: false\n"))
	return path
}

// --grpc-max-recv-msg-size and --grpc-max-send-msg-size take sizes as llm-d
// reads them (Kubernetes quantities, a trailing B dropped), and the
// ext_proc server refuses a message over the receive limit.
func TestGRPCMaxMsgSizeFlags(t *testing.T) {
	for s, want := range map[string]int{"10MiB": 10 << 20, "25MB": 25e6, "4Mi": 4 << 20, "1024": 1024, " 2Ki ": 2048, "1kB": 1000} {
		f, err := parseFlags([]string{"--pool-name", "p", "--grpc-max-recv-msg-size", s, "--grpc-max-send-msg-size", s}, io.Discard)
		require.NoError(t, err, s)
		require.Equal(t, want, f.llmdServer.grpcMaxRecvMsgSize, s)
		require.Equal(t, want, f.llmdServer.grpcMaxSendMsgSize, s)
	}
	for _, s := range []string{"-1", "ten", "1e30", ""} {
		_, err := parseFlags([]string{"--pool-name", "p", "--grpc-max-recv-msg-size", s}, io.Discard)
		require.ErrorContains(t, err, "grpc-max-recv-msg-size", s)
	}

	t.Cleanup(leakcheck.Check(t))
	m := startEPPWith(t, "--grpc-max-recv-msg-size", "2KiB")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := process(t, ctx, m[1], 4096)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	imm, err := process(t, ctx, m[1], 512)
	require.NoError(t, err)
	require.Nil(t, imm)
}

// --tls-min-version and --tls-cipher-suites, under llm-d's names for them,
// set ext_proc's TLS floor and its TLS 1.2 cipher suites; names llm-d does
// not accept are refused, and both need --secure-serving.
func TestTLSMinVersionAndCipherSuites(t *testing.T) {
	f, err := parseFlags([]string{"--pool-name", "p", "--tls-min-version", "VersionTLS13",
		"--tls-cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_RSA_WITH_RC4_128_SHA"}, io.Discard)
	require.NoError(t, err)
	require.EqualValues(t, tls.VersionTLS13, f.llmdServer.tlsMinVersion)
	require.Equal(t, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_RC4_128_SHA}, f.llmdServer.tlsCipherSuites)
	for _, args := range [][]string{
		{"--tls-min-version", "TLS1.3"},
		{"--tls-cipher-suites", "TLS_NO_SUCH_SUITE"},
		{"--tls-min-version", "VersionTLS12", "--secure-serving=false"},
	} {
		_, err := parseFlags(append([]string{"--pool-name", "p"}, args...), io.Discard)
		require.ErrorContains(t, err, "tls-", args)
	}

	t.Cleanup(leakcheck.Check(t))
	handshake := func(addr string, conf *tls.Config) error {
		conf.InsecureSkipVerify = true //nolint:gosec // self-signed
		conf.NextProtos = []string{"h2"}
		c, err := tls.Dial("tcp", addr, conf)
		if err == nil {
			c.Close()
		}
		return err
	}
	m := startEPPWith(t, "--secure-serving", "--tls-min-version", "VersionTLS13")
	require.Error(t, handshake(m[1], &tls.Config{MaxVersion: tls.VersionTLS12}))
	require.NoError(t, handshake(m[1], &tls.Config{MinVersion: tls.VersionTLS13}))

	m = startEPPWith(t, "--secure-serving", "--tls-cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")
	require.Error(t, handshake(m[1], &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305}}))
	require.NoError(t, handshake(m[1], &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}))
}

// An empty --tls-cipher-suites (a chart rendering an empty list) keeps Go's
// default TLS 1.2 suites, as Kubernetes' cipher suite flags read it,
// rather than an empty list, which would refuse every TLS 1.2 handshake.
func TestEmptyTLSCipherSuitesKeepTheDefaults(t *testing.T) {
	f, err := parseFlags([]string{"--pool-name", "p", "--tls-cipher-suites", ""}, io.Discard)
	require.NoError(t, err)
	require.Nil(t, f.llmdServer.tlsCipherSuites)

	t.Cleanup(leakcheck.Check(t))
	m := startEPPWith(t, "--secure-serving", "--tls-cipher-suites", " , ")
	c, err := tls.Dial("tcp", m[1], &tls.Config{MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2"}, InsecureSkipVerify: true}) //nolint:gosec // self-signed
	require.NoError(t, err, "a TLS 1.2 client is served Go's default suites")
	c.Close()
}

// --v sets the log level as llm-d's verbosity does when neither
// --log-level nor --zap-log-level is given: 4 (llm-d's DEBUG) and above
// debug, below info; given, either of those wins.
func TestVerbosityFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "info"},
		{[]string{"--v", "2"}, "info"},
		{[]string{"--v", "4"}, "debug"},
		{[]string{"--v=5"}, "debug"},
		{[]string{"--v", "0"}, "info"},
		{[]string{"--v", "5", "--zap-log-level", "error"}, "error"},
		{[]string{"--log-level", "warn", "--v", "5"}, "warn"},
	} {
		f, err := parseFlags(append([]string{"--pool-name", "p"}, c.args...), io.Discard)
		require.NoError(t, err, c.args)
		require.Equal(t, c.want, f.logLevel, c.args)
	}
	_, err := parseFlags([]string{"--pool-name", "p", "--v", "verbose"}, io.Discard)
	require.ErrorContains(t, err, "-v")
}

// --config-file is llm-d's name for --config; giving both is an error.
func TestConfigFileFlag(t *testing.T) {
	f, err := parseFlags([]string{"--pool-name", "p", "--config-file", "/config/epp.yaml"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "/config/epp.yaml", f.configPath)
	_, err = parseFlags([]string{"--pool-name", "p", "--config-file", "a", "--config", "b"}, io.Discard)
	require.ErrorContains(t, err, "--config-file")
}

// llm-d's flags that cannot apply are accepted with their values checked,
// and each is logged once at start with why.
func TestLLMDIgnoredFlags(t *testing.T) {
	args := []string{"--disable-endpoint-subset-filter",
		"--emit-endpoint-scores=false", "--refresh-metrics-interval", "100ms", "--refresh-prometheus-metrics-interval", "5s",
		"--metrics-staleness-threshold", "2s", "--enable-grpc-stream-metrics", "--allow-experimental-plugins",
		"--plugin-state-staleness-threshold", "10m", "--fairness-id-metric-label-limit=0"}
	// llm-d's flag library reads an int in Go's literal syntax.
	for _, n := range []string{"0x10", "1_000", "0"} {
		_, err := parseFlags([]string{"--pool-name", "p", "--fairness-id-metric-label-limit", n}, io.Discard)
		require.NoError(t, err, n)
	}
	f, err := parseFlags(append([]string{"--pool-name", "p"}, args...), io.Discard)
	require.NoError(t, err)
	require.Len(t, f.llmdServer.ignored, len(llmdIgnoredFlags))
	for _, bad := range [][]string{{"--tracing=maybe"}, {"--refresh-metrics-interval", "soon"},
		{"--plugin-state-staleness-threshold", "0s"}, {"--fairness-id-metric-label-limit", "-1"}, {"--fairness-id-metric-label-limit", "x"}} {
		_, err := parseFlags(append([]string{"--pool-name", "p"}, bad...), io.Discard)
		require.ErrorContains(t, err, strings.SplitN(bad[0], "=", 2)[0][2:], bad)
	}

	t.Cleanup(leakcheck.Check(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // run starts, then stops at once
	var stderr syncbuf.Buffer
	require.NoError(t, run(ctx, append([]string{"--endpoints", "127.0.0.1:1", "--config", configFile(t), "--listen-host", "127.0.0.1",
		"--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0", "--drain-timeout=0"}, args...), io.Discard, &stderr))
	for name, why := range llmdIgnoredFlags {
		require.Equal(t, 1, strings.Count(stderr.String(), "flag=--"+name+" "), stderr.String())
		require.Contains(t, stderr.String(), why[:20])
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

// The README's list of llm-d's router EPP flags that kvroute-epp accepts
// and ignores is llmdIgnoredFlags: no flag kvroute-epp honours (such as
// --ha-enable-leader-election or --tracing) is told to be ignored, and no
// ignored one is left out.
func TestREADMEListsTheLLMDIgnoredFlags(t *testing.T) {
	b, err := os.ReadFile("../../../../README.md")
	require.NoError(t, err)
	readme := strings.Join(strings.Fields(string(b)), " ")
	const tail = " are checked, accepted and logged once at start as ignored."
	end := strings.Index(readme, tail)
	require.NotEqual(t, -1, end, "the README lists llm-d's flags kvroute-epp ignores")
	start := strings.LastIndex(readme[:end], ". ")
	require.NotEqual(t, -1, start)
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`--([a-z0-9-]+)`").FindAllStringSubmatch(readme[start:end], -1) {
		listed[m[1]] = true
	}
	want := map[string]bool{}
	for name := range llmdIgnoredFlags {
		want[name] = true
	}
	require.Equal(t, want, listed, "README: %s", readme[start:end+len(tail)])
}
