package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine"
)

// --lora-config is read with package lora's strict rules before anything
// starts; the engine metrics file it is scraped with is checked too; a
// start that fails after the scraper was built stops it again.
func TestLoRAConfigIsCheckedBeforeStarting(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	for content, want := range map[string]string{
		"weigth: 2\n":            "weigth",
		"weight: -1\n":           "weight",
		"capPenalty: 0.5\n":      "capPenalty",
		"weight: [1]\n":          "weight",
		"weight: 1\nweight: 2\n": "weight",
	} {
		err := tryRun("--lora-config", writeConfig(t, dir, "lora.yaml", content))
		require.ErrorContains(t, err, "--lora-config", content)
		require.ErrorContains(t, err, want, content)
	}
	err := tryRun("--lora-config", filepath.Join(dir, "absent.yaml"))
	require.ErrorContains(t, err, "--lora-config")

	good := writeConfig(t, dir, "good.yaml", "{}\n")
	err = tryRun("--lora-config", good, "--engine-metrics-config", writeConfig(t, dir, "em.yaml", "intervl: 1s\n"))
	require.ErrorContains(t, err, "intervl")
	// The scraper is built, then the P/D file fails: leakcheck sees the
	// scraper's goroutine stopped.
	err = tryRun("--lora-config", good, "--disagg-config", writeConfig(t, dir, "pd.yaml", "nonCachedTokenz: 1\n"))
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
		cfg := engineConfig()
		cfg.LoRAModules = []string{"sql", "chat"}
		cfg.Engine.LoRA = &simengine.LoRAConfig{MaxLoRAs: 1, LoadTime: time.Millisecond}
		eng, addr, stop := serveEngine(t, cfg)
		t.Cleanup(func() {
			require.Equal(t, uint64(1), eng.Engine().Stats().LoRALoads, "engine %d loaded its adapter once, for the warm-up", i)
			stop()
		})
		eps = append(eps, addr)
		resp, body := postCompletion(t, client, "http://"+addr, loraBody(adapter, i), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
	}
	return eps
}

// loraBody is a completion request for model (the base model or an
// adapter), its prompt numbered k.
func loraBody(model string, k int) string {
	return fmt.Sprintf(`{"model":%q,"prompt":"tell me about adapters, part %d","max_tokens":2}`, model, k)
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
	cfgPath := writeConfig(t, dir, "config.yaml", noRenderConfig)
	loraPath := writeConfig(t, dir, "lora.yaml", "weight: 1\n")
	// A signal is fresh only while the endpoint's last scrape succeeded:
	// neither the timeout nor the staleness may depend on how busy the
	// machine is; shutdown ends the scrapes in flight.
	emPath := writeConfig(t, dir, "engine-metrics.yaml", "interval: 10ms\nstaleness: 1h\ntimeout: 1h\n")
	pdPath := writeConfig(t, dir, "disagg.yaml", "nonCachedTokens: 1073741824\n")

	for _, pd := range []bool{false, true} {
		args := []string{"--endpoints", strings.Join(eps, ","), "--config", cfgPath, "--lora-config", loraPath, "--engine-metrics-config", emPath}
		if pd {
			args = append(args, "--disagg-config", pdPath)
		}
		e := startBehindEnvoy(t, args...)
		// The warm-up ended before the picker started: any scrape it
		// completes has read the adapters.
		require.Eventually(t, func() bool {
			page := e.metrics()
			return series(page, `kvroute_engine_metrics_scrapes_total{endpoint="`+eps[0]+`"}`) >= 1 &&
				series(page, `kvroute_engine_metrics_scrapes_total{endpoint="`+eps[1]+`"}`) >= 1
		}, 20*time.Second, 5*time.Millisecond)

		post := func(model string, k int) string { return routedTo(t, e.client, e.envoy, loraBody(model, k), nil) }
		for k := 10; k < 14; k++ {
			require.Equal(t, eps[1], post("sql", k), "P/D %v: sql runs on the second engine", pd)
			require.Equal(t, eps[0], post("chat", k), "P/D %v: chat runs on the first engine", pd)
		}
		require.Positive(t, series(e.metrics(), `kvroute_lora_candidates_total{state="running"}`), "P/D %v", pd)
		e.stop()
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
