package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// simFleet is n simulated vLLM engines (KV events with replay, render
// routes, cached_tokens in usage) behind a precise gateway that observes
// cached tokens.
type simFleet struct {
	engines []*server.Server
	served  []chan error
	eps     []kvroute.Endpoint
	gw      *Server
	client  *http.Client
}

func startSimFleet(t *testing.T, n int, mutate ...func(*kvroute.Config)) *simFleet {
	t.Helper()
	f := &simFleet{client: &http.Client{Transport: &http.Transport{}}}
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		id := ln.Addr().String()
		replay := "tcp://127.0.0.1:0"
		srv, err := server.New(server.Config{Model: testModel, EnableScaleOut: true,
			Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: time.Millisecond},
			KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: "tcp://127.0.0.1:0",
				ReplayEndpoint: &replay, Topic: "kv@" + id + "@" + testModel}}, server.Options{})
		require.NoError(t, err)
		ch := make(chan error, 1)
		go func() { ch <- srv.Serve(ln) }()
		f.engines, f.served = append(f.engines, srv), append(f.served, ch)
		f.eps = append(f.eps, kvroute.Endpoint{ID: id, EventsAddress: srv.KVEventsEndpoint(), ReplayAddress: srv.ReplayEndpoint()})
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	for _, m := range mutate {
		m(&cfg)
	}
	var err error
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: f.eps,
		Proxy: Config{ObserveCachedTokens: true}}, Options{})
	require.NoError(t, err)
	return f
}

func (f *simFleet) close(t *testing.T) {
	f.client.CloseIdleConnections()
	require.NoError(t, f.gw.Shutdown(context.Background()))
	for i, e := range f.engines {
		require.NoError(t, e.Close())
		<-f.served[i]
	}
}

func (f *simFleet) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := f.client.Get(f.gw.URL() + path)
	require.NoError(t, err)
	return resp.StatusCode, readAll(t, resp)
}

func (f *simFleet) complete(t *testing.T, prompt string) *http.Response {
	t.Helper()
	resp, err := f.client.Post(f.gw.URL()+"/v1/completions", "application/json", strings.NewReader(completionsBody(prompt, false)))
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp
}

// /ready turns 200 once every engine's stream is live; /health does not
// wait for it. The status page lists every endpoint and the decisions.
func TestGatewayReadyAndStatusPage(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startSimFleet(t, 2)
	defer f.close(t)

	code, _ := f.get(t, "/health")
	require.Equal(t, http.StatusOK, code)
	require.Eventually(t, func() bool { code, _ := f.get(t, "/ready"); return code == http.StatusOK }, wait, 10*time.Millisecond)
	_, body := f.get(t, "/ready")
	var ready struct {
		Ready     bool
		Endpoints []struct{ ID, State string }
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ready))
	require.True(t, ready.Ready)
	require.Len(t, ready.Endpoints, 2)
	for _, e := range ready.Endpoints {
		require.Equal(t, "live", e.State)
	}

	code, page := f.get(t, StatusPath)
	require.Equal(t, http.StatusOK, code)
	for _, e := range f.eps {
		require.Contains(t, page, `data-id="`+e.ID+`"`)
	}
	require.NotContains(t, page, `class="decision"`)
	require.NotContains(t, page, "<script")

	prompt := strings.Repeat("status page ", 40)
	resp := f.complete(t, prompt)
	ep := resp.Header.Get(HeaderEndpoint)
	require.Eventually(t, func() bool { return len(f.gw.Handler().Recent()) == 1 }, wait, time.Millisecond)
	_, page = f.get(t, StatusPath)
	require.Contains(t, page, `class="decision"`)
	require.Contains(t, page, "<td>"+ep+"</td>")

	// The engine's KV events bring the prompt's blocks in; a repeat is predicted and reused exactly.
	require.Eventually(t, func() bool { return f.gw.Router().Index().EndpointBlocks(ep) > 0 }, wait, 10*time.Millisecond)
	resp = f.complete(t, prompt)
	require.Equal(t, ep, resp.Header.Get(HeaderEndpoint))
	require.Eventually(t, func() bool { return len(f.gw.Handler().Recent()) == 2 }, wait, time.Millisecond)
	last := f.gw.Handler().Recent()[0]
	require.Positive(t, last.ActualCached)
	require.Equal(t, 0, last.Error, "%+v", last)
}

// chromium returns the headless Chromium to test with, skipping unless it
// is installed (required with KVROUTE_REQUIRE_CHROMIUM=1).
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("KVROUTE_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("chromium is required (KVROUTE_REQUIRE_CHROMIUM=1): %v", err)
		}
		t.Skip("chromium not installed")
	}
	return path
}

// dumpDOM loads url in headless Chromium and returns the DOM after load.
func dumpDOM(t *testing.T, bin, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--dump-dom", url)
	out, err := cmd.Output()
	require.NoError(t, err, "chromium: %s", errText(err))
	return string(out)
}

func errText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return fmt.Sprint(err)
}

// TestStatusPageInHeadlessChromium loads the status page in a real browser
// against a running gateway with simulated engines: it renders, lists
// every endpoint with its stream state, and shows a request made after the
// first load.
func TestStatusPageInHeadlessChromium(t *testing.T) {
	bin := chromium(t)
	defer leakcheck.Check(t)()
	f := startSimFleet(t, 3)
	defer f.close(t)
	require.Eventually(t, func() bool { code, _ := f.get(t, "/ready"); return code == http.StatusOK }, wait, 10*time.Millisecond)

	dom := dumpDOM(t, bin, f.gw.URL()+StatusPath)
	require.Contains(t, dom, "<h1>kvroute gateway</h1>")
	require.Contains(t, dom, `<b id="ready">true</b>`)
	for _, e := range f.eps {
		require.Contains(t, dom, `data-id="`+e.ID+`"`)
	}
	require.Equal(t, 3, strings.Count(dom, `<td class="live">live</td>`))
	require.Zero(t, strings.Count(dom, `class="decision"`))

	resp := f.complete(t, strings.Repeat("browser ", 50))
	ep := resp.Header.Get(HeaderEndpoint)
	require.Eventually(t, func() bool { return len(f.gw.Handler().Recent()) == 1 }, wait, time.Millisecond)
	dom = dumpDOM(t, bin, f.gw.URL()+StatusPath)
	require.Equal(t, 1, strings.Count(dom, `class="decision"`))
	require.Contains(t, dom, "<td>"+ep+"</td>")
}
