package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

// chromiumArgs are the flags of every headless Chromium run: no network
// beyond the page, no first-run work, a fresh profile, console messages
// logged to stderr.
func chromiumArgs(t *testing.T, extra ...string) []string {
	return append([]string{"--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0"}, extra...)
}

// dumpDOM loads url in headless Chromium and returns the DOM after load,
// failing the test on any message the page wrote to the console (script
// errors, invalid SVG attributes, resources that failed to load).
func dumpDOM(t *testing.T, bin, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a loaded machine starts Chromium slowly
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, chromiumArgs(t, "--dump-dom", url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "chromium: %s", stderr.String())
	require.Empty(t, consoleMessages(stderr.String()), "the page wrote to the browser console")
	return string(out)
}

// consoleMessages returns the page's console lines in Chromium's log.
func consoleMessages(log string) []string {
	var out []string
	for l := range strings.Lines(log) {
		if strings.Contains(l, ":CONSOLE") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// screenshot loads url in headless Chromium and returns the rendered page.
func screenshot(t *testing.T, bin, url string) image.Image {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a loaded machine starts Chromium slowly
	defer cancel()
	file := filepath.Join(t.TempDir(), "page.png")
	out, err := exec.CommandContext(ctx, bin, chromiumArgs(t, "--window-size=1400,1600", "--hide-scrollbars",
		"--screenshot="+file, url)...).CombinedOutput()
	require.NoError(t, err, "chromium: %s", out)
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	return img
}

// pixels counts the pixels of img in exactly the colour "#rrggbb".
func pixels(img image.Image, hex string) int {
	var want [3]uint8
	_, _ = fmt.Sscanf(hex, "#%02x%02x%02x", &want[0], &want[1], &want[2])
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == want[0] && uint8(g>>8) == want[1] && uint8(bl>>8) == want[2] {
				n++
			}
		}
	}
	return n
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

// The accuracy chart is drawn by a real browser, without a console
// message: the page with an observed request paints more of the two
// lines' colours than the page before it (whose only such pixels are the
// legend's).
func TestStatusPageChartInHeadlessChromium(t *testing.T) {
	bin := chromium(t)
	defer leakcheck.Check(t)()
	f := startSimFleet(t, 2)
	defer f.close(t)
	require.Eventually(t, func() bool { code, _ := f.get(t, "/ready"); return code == http.StatusOK }, wait, 10*time.Millisecond)

	dom := dumpDOM(t, bin, f.gw.URL()+StatusPath)
	require.Contains(t, dom, `<svg id="share-chart"`)
	require.Zero(t, strings.Count(dom, `<circle class="predicted"`))
	before := screenshot(t, bin, f.gw.URL()+StatusPath)

	f.complete(t, strings.Repeat("drift chart ", 50))
	require.Eventually(t, func() bool { return len(f.gw.Handler().history.samples()) == 1 }, wait, time.Millisecond)
	dom = dumpDOM(t, bin, f.gw.URL()+StatusPath)
	require.Equal(t, 1, strings.Count(dom, `<circle class="predicted"`))
	require.Equal(t, 1, strings.Count(dom, `<circle class="engine"`))
	after := screenshot(t, bin, f.gw.URL()+StatusPath)
	for _, c := range []string{predictedColor, engineColor} {
		require.Greater(t, pixels(after, c), pixels(before, c), "the chart's %s marks are painted", c)
	}
}

// The status page names each request (the client's X-Request-Id, or the
// ID the gateway gave it) and its model, each endpoint's role and index
// source, the effective configuration without its credentials, and charts
// the predicted against the engine-reported cached share.
func TestStatusPageShowsRequestModelRoleConfigAndChart(t *testing.T) {
	defer leakcheck.Check(t)()
	const redisPassword, bootstrapToken = "redis-pw-5f1d9c", "bootstrap-tok-8a2e44"
	f := startSimFleet(t, 2, func(c *kvroute.Config) {
		c.Cluster.Password = redisPassword
		c.Bootstrap.Token = bootstrapToken
	})
	defer f.close(t)
	eps := append([]kvroute.Endpoint(nil), f.eps...)
	eps[0].Labels = map[string]string{RoleLabel: "decode"}
	require.NoError(t, f.gw.SetEndpoints(eps))
	require.Eventually(t, func() bool { code, _ := f.get(t, "/ready"); return code == http.StatusOK }, wait, 10*time.Millisecond)

	prompt := strings.Repeat("chart the share ", 40)
	resp := f.complete(t, prompt)
	ep := resp.Header.Get(HeaderEndpoint)
	require.Eventually(t, func() bool { return f.gw.Router().Index().EndpointBlocks(ep) > 0 }, wait, 10*time.Millisecond)
	req, err := http.NewRequest(http.MethodPost, f.gw.URL()+"/v1/completions", strings.NewReader(completionsBody(prompt, false)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "client-id-42")
	resp, err = f.client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool { return len(f.gw.Handler().Recent()) == 2 }, wait, time.Millisecond)

	code, page := f.get(t, StatusPath)
	require.Equal(t, http.StatusOK, code)
	rec := f.gw.Handler().Recent()
	require.Equal(t, "client-id-42", rec[0].RequestID)
	require.True(t, strings.HasPrefix(rec[1].RequestID, "kvr-"), rec[1].RequestID)
	require.Contains(t, page, `<td class="request-id">client-id-42</td>`)
	require.Contains(t, page, `<td class="request-id">`+rec[1].RequestID+`</td>`)
	require.Equal(t, 2, strings.Count(page, `<td class="model">`+testModel+`</td>`))
	require.Contains(t, page, `<b id="model">`+testModel+`</b>`)
	require.Contains(t, page, `<td class="role">decode</td>`)
	require.Contains(t, page, `<td class="source">KV events, `)
	require.Contains(t, page, "; replay tcp://127.0.0.1:")
	require.Regexp(t, `; rebuilt from (the replay window|the live stream)`, page, "what the endpoint's entries were rebuilt from")

	// The configuration is there, its credentials are not.
	require.Contains(t, page, "router.cluster.password: [redacted]")
	require.Contains(t, page, "router.bootstrap.token: [redacted]")
	require.Contains(t, page, "router.model: &#34;"+testModel+"&#34;")
	require.Contains(t, page, "proxy.observeCachedTokens: true")
	require.Contains(t, page, "router.queueThresholdTokens: ")
	for _, secret := range []string{redisPassword, bootstrapToken} {
		require.NotContains(t, page, secret)
	}

	// Both requests were observed in this 10 s bucket or two: the chart
	// has a point per bucket on each line.
	require.Contains(t, page, `<svg id="share-chart"`)
	n := len(f.gw.Handler().history.samples())
	require.GreaterOrEqual(t, n, 1)
	require.Equal(t, n, strings.Count(page, `<circle class="predicted"`))
	require.Equal(t, n, strings.Count(page, `<circle class="engine"`))
	require.Contains(t, page, "Latest (")
}
