package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// --disagg-config is read with package disagg's strict rules before the
// picker starts.
func TestDisaggConfigIsCheckedBeforeStarting(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	for content, want := range map[string]string{
		"nonCachedTokenz: 10\n":       "nonCachedTokenz",
		"maxPrefillQueueTokens: -1\n": "maxPrefillQueueTokens",
	} {
		err := tryRun("--disagg-config", writeConfig(t, dir, "disagg.yaml", content))
		require.ErrorContains(t, err, want)
	}
	err := tryRun("--disagg-config", filepath.Join(dir, "absent.yaml"))
	require.ErrorContains(t, err, "--disagg-config")
}

// kvroute-epp with --disagg-config behind an Envoy-behaving proxy over real
// gRPC, two simulated engines of no role (each may prefill and decode): a
// long new Responses request is split, its decode engine receiving
// x-prefiller-host-port naming the other, when splitAPIs names responses
// (for a routing sidecar that splits /v1/responses, as llm-d's newer one
// and kvroute's do); with the default list it stays local, no prefiller
// named, counted in kvroute_disagg_decisions_total{reason="api"}. Before,
// no configuration split it.
func TestRunSplitsResponsesWhenConfigured(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the picker, which Cleanup stops if the test fails
	var mu sync.Mutex
	got := map[string][]string{} // engine → the x-prefiller-host-port of each Responses request
	var eps []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		id := ln.Addr().String()
		eng, err := server.New(server.Config{Model: model, EnableScaleOut: true,
			Engine: simengine.Config{BlockSize: 16, NumGPUBlocks: 1024, PrefillTokensPerSecond: 1e7, DecodeStep: 50 * time.Microsecond}}, server.Options{})
		require.NoError(t, err)
		inner := eng.Handler()
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/responses" {
				mu.Lock()
				got[id] = append(got[id], r.Header.Get(disagg.HeaderPrefiller))
				mu.Unlock()
			}
			inner.ServeHTTP(w, r)
		})}
		served := make(chan error, 1)
		go func() { served <- hs.Serve(ln) }()
		defer func() { _ = hs.Close(); <-served; _ = eng.Close() }()
		eps = append(eps, id)
	}
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, "config.yaml", "model: "+model+"\nblockSize: 16\nevents:\n  enabled: false\n")

	for i, c := range []struct {
		name, pd string
		split    bool
	}{
		{"splitAPIs names responses", "nonCachedTokens: 256\nsplitAPIs: [completions, chat_completions, responses]\n", true},
		{"default splitAPIs", "nonCachedTokens: 256\n", false},
	} {
		e := startBehindEnvoy(t, "--endpoints", strings.Join(eps, ","), "--config", cfgPath,
			"--disagg-config", writeConfig(t, dir, fmt.Sprintf("disagg%d.yaml", i), c.pd))

		var input strings.Builder
		for k := range 600 {
			fmt.Fprintf(&input, "w%dx%d ", i, k)
		}
		resp, err := e.client.Post(e.envoy+"/v1/responses", "application/json",
			strings.NewReader(fmt.Sprintf(`{"model":%q,"input":%q,"max_output_tokens":2}`, model, input.String())))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		dec := resp.Header.Get(extproc.EndpointHeader)
		require.Contains(t, eps, dec, c.name)
		other := eps[0]
		if dec == eps[0] {
			other = eps[1]
		}
		mu.Lock()
		hdrs := got[dec]
		got = map[string][]string{}
		mu.Unlock()
		metrics := e.metrics()
		if c.split {
			require.Equal(t, []string{other}, hdrs, "%s: the decode engine is told its prefiller", c.name)
			require.Contains(t, metrics, `kvroute_disagg_decisions_total{outcome="split",reason="uncached"} 1`, c.name)
		} else {
			require.Equal(t, []string{""}, hdrs, "%s: no prefiller named", c.name)
			require.Contains(t, metrics, `kvroute_disagg_decisions_total{outcome="local",reason="api"} 1`, c.name)
		}

		e.stop()
	}
}
