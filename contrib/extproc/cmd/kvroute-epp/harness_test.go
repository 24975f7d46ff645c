package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// startEPP runs the binary with args on free loopback ports and returns the
// ext_proc, health and metrics addresses it prints (m[1], m[2], m[3]) and
// the channel run's result arrives on once ctx is cancelled.
func startEPP(t *testing.T, ctx context.Context, args ...string) ([]string, chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	// h2c unless args ask for TLS: the test clients speak plaintext.
	// No drain window after cancellation unless args ask for one.
	args = append([]string{"--secure-serving=false", "--drain-timeout=0"}, args...)
	args = append(args, "--listen-host", "127.0.0.1", "--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0",
		"--log-level", "error")
	go func() {
		done <- run(ctx, args, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`ext_proc on (\S+), health on (\S+), metrics on (\S+)`).FindStringSubmatch(line)
	require.Len(t, m, 4, line)
	return m, done
}

// startSimEngine serves a simulated vLLM engine of model (render on, KV
// events off) on a free loopback port and returns its address and the
// function that stops it.
func startSimEngine(t *testing.T) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	eng, err := server.New(server.Config{Model: model, EnableScaleOut: true,
		Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 256, PrefillTokensPerSecond: 1e6, DecodeStep: time.Millisecond}}, server.Options{})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- eng.Serve(ln) }()
	return ln.Addr().String(), func() { _ = eng.Close(); <-served }
}

// startEnvoy serves a simulated Envoy in front of the ext_proc server at
// addr and returns its URL, a client for it and the function that stops
// both.
func startEnvoy(t *testing.T, addr string) (string, *http.Client, func()) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	upstream := &http.Client{Transport: &http.Transport{}}
	envoy := httptest.NewServer(envoysim.New(envoysim.Config{}, extprocv3.NewExternalProcessorClient(conn), upstream))
	client := &http.Client{Transport: &http.Transport{}}
	return envoy.URL, client, func() {
		client.CloseIdleConnections()
		envoy.Close()
		upstream.CloseIdleConnections()
		conn.Close()
	}
}

// scrapePlain returns the text of a plain-HTTP metrics URL.
func scrapePlain(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
