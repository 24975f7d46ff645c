package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/contrib/extproc/envoysim"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// --lora-config is read with package lora's strict rules before anything
// starts; the engine metrics file it is scraped with is checked too; a
// start that fails after the scraper was built stops it again.
func TestLoRAConfigIsCheckedBeforeStarting(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	args := []string{"--endpoints", "127.0.0.1:8000", "--model", model,
		"--listen-host", "127.0.0.1", "--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0"}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	for content, want := range map[string]string{
		"weigth: 2\n":            "weigth",
		"weight: -1\n":           "weight",
		"capPenalty: 0.5\n":      "capPenalty",
		"weight: [1]\n":          "weight",
		"weight: 1\nweight: 2\n": "weight",
	} {
		err := run(context.Background(), append(args, "--lora-config", write("lora.yaml", content)), io.Discard, io.Discard)
		require.ErrorContains(t, err, "--lora-config", content)
		require.ErrorContains(t, err, want, content)
	}
	err := run(context.Background(), append(args, "--lora-config", filepath.Join(dir, "absent.yaml")), io.Discard, io.Discard)
	require.ErrorContains(t, err, "--lora-config")

	good := write("good.yaml", "{}\n")
	err = run(context.Background(), append(args, "--lora-config", good, "--engine-metrics-config", write("em.yaml", "intervl: 1s\n")), io.Discard, io.Discard)
	require.ErrorContains(t, err, "intervl")
	// The scraper is built, then the P/D file fails: leakcheck sees the
	// scraper's goroutine stopped.
	err = run(context.Background(), append(args, "--lora-config", good, "--disagg-config", write("pd.yaml", "nonCachedTokenz: 1\n")), io.Discard, io.Discard)
	require.ErrorContains(t, err, "nonCachedTokenz")
}

// loraEngines starts two simulated engines serving adapters sql and chat
// with one adapter slot each, and runs sql on the second and chat on the
// first by sending each a request directly. It returns their addresses.
func loraEngines(t *testing.T) []string {
	t.Helper()
	var eps []string
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for i, adapter := range []string{"chat", "sql"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		eng, err := server.New(server.Config{Model: model, LoRAModules: []string{"sql", "chat"},
			Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 256, PrefillTokensPerSecond: 1e6, DecodeStep: time.Millisecond,
				LoRA: &simengine.LoRAConfig{MaxLoRAs: 1, LoadTime: time.Millisecond}}}, server.Options{})
		require.NoError(t, err)
		served := make(chan error, 1)
		go func() { served <- eng.Serve(ln) }()
		t.Cleanup(func() {
			require.Equal(t, uint64(1), eng.Engine().Stats().LoRALoads, "engine %d loaded its adapter once, for the warm-up", i)
			_ = eng.Close()
			<-served
		})
		eps = append(eps, ln.Addr().String())
		code, body := completion(t, client, "http://"+eps[i], adapter, i)
		require.Equal(t, http.StatusOK, code, body)
	}
	return eps
}

// completion posts a completion for model (the base model or an adapter)
// to url and returns the status and the body.
func completion(t *testing.T, client *http.Client, url, model string, k int) (int, string) {
	t.Helper()
	resp, err := client.Post(url+"/v1/completions", "application/json",
		strings.NewReader(fmt.Sprintf(`{"model":%q,"prompt":"tell me about adapters, part %d","max_tokens":2}`, model, k)))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body)
}

// kvroute-epp with --lora-config behind an Envoy-behaving proxy, in one
// role and under P/D (where the decode pick, which replaces the router's,
// takes the LoRA scorer): once the scraper has read both engines' adapter
// state, a request for an adapter goes to the engine running it, where a
// pick by load alone sends every request to the first engine; no engine
// loads an adapter again (loraEngines checks); the scorer's metric counts
// the candidates it rated.
func TestRunWithLoRAAffinity(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the engines, which Cleanup closes first
	eps := loraEngines(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("model: "+model+"\nblockSize: 16\ndisableRender: true\nevents:\n  enabled: false\n"), 0o600))
	loraPath := filepath.Join(dir, "lora.yaml")
	require.NoError(t, os.WriteFile(loraPath, []byte("weight: 1\n"), 0o600))
	// A signal is fresh only while the endpoint's last scrape succeeded:
	// neither the timeout nor the staleness may depend on how busy the
	// machine is; shutdown ends the scrapes in flight.
	emPath := filepath.Join(dir, "engine-metrics.yaml")
	require.NoError(t, os.WriteFile(emPath, []byte("interval: 10ms\nstaleness: 1h\ntimeout: 1h\n"), 0o600))
	pdPath := filepath.Join(dir, "disagg.yaml")
	require.NoError(t, os.WriteFile(pdPath, []byte("nonCachedTokens: 1073741824\n"), 0o600))

	for _, pd := range []bool{false, true} {
		args := []string{"--endpoints", strings.Join(eps, ","), "--config", cfgPath, "--lora-config", loraPath, "--engine-metrics-config", emPath}
		if pd {
			args = append(args, "--disagg-config", pdPath)
		}
		ctx, cancel := context.WithCancel(context.Background())
		m, done := startEPP(t, ctx, args...)
		conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		upstream := &http.Client{Transport: &http.Transport{}}
		envoy := httptest.NewServer(envoysim.New(envoysim.Config{}, extprocv3.NewExternalProcessorClient(conn), upstream))
		client := &http.Client{Transport: &http.Transport{}}
		metrics := func() string {
			resp, err := client.Get(m[3])
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(b)
		}
		// The warm-up ended before the picker started: any scrape it
		// completes has read the adapters.
		require.Eventually(t, func() bool {
			page := metrics()
			return series(page, `kvroute_engine_metrics_scrapes_total{endpoint="`+eps[0]+`"}`) >= 1 &&
				series(page, `kvroute_engine_metrics_scrapes_total{endpoint="`+eps[1]+`"}`) >= 1
		}, 20*time.Second, 5*time.Millisecond)

		post := func(model string, k int) string {
			req, err := http.NewRequest(http.MethodPost, envoy.URL+"/v1/completions",
				strings.NewReader(fmt.Sprintf(`{"model":%q,"prompt":"tell me about adapters, part %d","max_tokens":2}`, model, k)))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			return resp.Header.Get(extproc.EndpointHeader)
		}
		for k := 10; k < 14; k++ {
			require.Equal(t, eps[1], post("sql", k), "P/D %v: sql runs on the second engine", pd)
			require.Equal(t, eps[0], post("chat", k), "P/D %v: chat runs on the first engine", pd)
		}
		page := metrics()
		require.Positive(t, series(page, `kvroute_lora_candidates_total{state="running"}`), "P/D %v", pd)

		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("run did not return after cancellation")
		}
		envoy.Close()
		client.CloseIdleConnections()
		upstream.CloseIdleConnections()
		require.NoError(t, conn.Close())
	}
}

// series returns the value of the series named exactly name (with its
// labels) on the Prometheus text page, -1 when absent.
func series(page, name string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// An llm-d lora-affinity-scorer in --config turns the LoRA scorer on
// without an admission stage: its scraper is built with enginemetrics'
// defaults, or with --engine-metrics-config's settings, which it alone
// now needs, and scrapes the endpoints given.
func TestLLMDLoRAScorerWithoutAdmission(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "epp.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: precise-prefix-cache-producer
  parameters:
    kvEventsConfig: {discoverPods: false}
- type: prefix-cache-affinity-filter
- type: token-load-scorer
- type: lora-affinity-scorer
`), 0o600))
	emPath := filepath.Join(dir, "engine-metrics.yaml")
	require.NoError(t, os.WriteFile(emPath, []byte("interval: 1h\nstaleness: 2h\n"), 0o600))
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for _, extra := range [][]string{nil, {"--engine-metrics-config", emPath}} {
		ctx, cancel := context.WithCancel(context.Background())
		m, done := startEPP(t, ctx, append([]string{"--endpoints", "127.0.0.1:8000", "--model", model, "--config", cfgPath}, extra...)...)
		resp, err := client.Get(m[3])
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(b)
		require.Equal(t, 0.0, series(page, `kvroute_lora_candidates_total{state="unknown"}`), extra)
		require.Equal(t, 1.0, series(page, "kvroute_engine_metrics_endpoints"), extra)
		require.NotContains(t, page, "llm_d_epp_flow_control_queue_size", "no admission stage")
		cancel()
		require.NoError(t, <-done)
	}
}
