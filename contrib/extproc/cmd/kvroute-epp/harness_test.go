package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute/contrib/extproc"
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

// engineConfig is the simulated vLLM engine of model the tests route to:
// blocks of 16 tokens, fast prefill and decode, no render routes, KV
// events off.
func engineConfig() server.Config {
	return server.Config{Model: model,
		Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 256, PrefillTokensPerSecond: 1e6, DecodeStep: time.Millisecond}}
}

// serveEngine serves a simulated engine with cfg on a free loopback port
// and returns it, its address and the function that stops it.
func serveEngine(t *testing.T, cfg server.Config) (*server.Server, string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	eng, err := server.New(cfg, server.Options{})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- eng.Serve(ln) }()
	return eng, ln.Addr().String(), func() { _ = eng.Close(); <-served }
}

// startSimEngine serves a simulated vLLM engine of model (render on, KV
// events off) on a free loopback port and returns its address and the
// function that stops it.
func startSimEngine(t *testing.T) (string, func()) {
	t.Helper()
	cfg := engineConfig()
	cfg.EnableScaleOut = true
	_, addr, stop := serveEngine(t, cfg)
	return addr, stop
}

// startEngines serves n engines of engineConfig until the test ends and
// returns their addresses.
func startEngines(t *testing.T, n int) []string {
	t.Helper()
	eps := make([]string, n)
	for i := range eps {
		var stop func()
		_, eps[i], stop = serveEngine(t, engineConfig())
		t.Cleanup(stop)
	}
	return eps
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
		require.NoError(t, conn.Close())
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

// eppRun is kvroute-epp run by a test on loopback behind a simulated Envoy.
type eppRun struct {
	t      *testing.T
	addrs  []string     // as startEPP returns them: ext_proc addrs[1], health addrs[2], metrics addrs[3]
	envoy  string       // the simulated Envoy's URL
	client *http.Client // a client for Envoy and the metrics

	stopEnvoy, cancel func()
	done              chan error
	once              sync.Once
}

// startBehindEnvoy runs the binary with args (as startEPP does) and a
// simulated Envoy in front of its ext_proc server, until stop or the end
// of the test.
func startBehindEnvoy(t *testing.T, args ...string) *eppRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	m, done := startEPP(t, ctx, args...)
	e := &eppRun{t: t, addrs: m, cancel: cancel, done: done}
	e.envoy, e.client, e.stopEnvoy = startEnvoy(t, m[1])
	t.Cleanup(e.stop)
	return e
}

// stop stops Envoy, then the picker, and checks run returned no error (at
// most once: later calls do nothing).
func (e *eppRun) stop() {
	e.once.Do(func() {
		e.stopEnvoy()
		e.cancel()
		waitRun(e.t, e.done)
	})
}

// waitRun waits for a cancelled run to return on done and checks it
// returned no error; a run still going after 30s fails the test.
func waitRun(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

// metrics returns the picker's metrics page.
func (e *eppRun) metrics() string {
	return scrapePlain(e.t, e.addrs[3])
}

// postCompletion posts the completion request body to base's
// /v1/completions with c (Content-Type application/json, then the headers
// h) and returns the response, its body read and closed, and the body.
func postCompletion(t *testing.T, c *http.Client, base, body string, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// routedTo posts as postCompletion does, checks the answer is 200 and
// returns the endpoint the picker chose.
func routedTo(t *testing.T, c *http.Client, base, body string, h map[string]string) string {
	t.Helper()
	resp, b := postCompletion(t, c, base, body, h)
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	return resp.Header.Get(extproc.EndpointHeader)
}

// noRenderConfig is a --config file: model, blocks of 16 tokens, no render
// (prompts are not tokenized) and no KV events, so the picker routes by
// load and what the stages a test turns on add.
const noRenderConfig = "model: " + model + "\nblockSize: 16\ndisableRender: true\nevents:\n  enabled: false\n"

// writeConfig writes content to the file name in dir and returns its path.
func writeConfig(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// tryRun runs the binary with a static endpoint, model and free loopback
// ports, then extra: a start expected to fail before it serves. It returns
// run's error.
func tryRun(extra ...string) error {
	args := []string{"--endpoints", "127.0.0.1:8000", "--model", model,
		"--listen-host", "127.0.0.1", "--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0"}
	return run(context.Background(), append(args, extra...), io.Discard, io.Discard)
}
