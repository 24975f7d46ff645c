package enginemetrics

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/stretchr/testify/require"
)

// The Scraper reads the simulated engine's real /metrics: idle (with its
// KV-cache capacity from vllm:cache_config_info), then with
// --max-num-seqs 1 and four long requests, 1 running and 3 waiting, which
// is saturated at a waiting threshold of 2.
func TestScrapesTheSimulatedEngine(t *testing.T) {
	srv, err := server.New(server.Config{Model: "m", Engine: simengine.Config{
		BlockSize: 4, NumGPUBlocks: 8192, MaxNumSeqs: 1, DecodeStep: 10 * time.Millisecond, PrefillTokensPerSecond: 1e6,
	}}, server.Options{})
	require.NoError(t, err)
	require.NoError(t, srv.Start("127.0.0.1:0"))
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	ep := kvroute.Endpoint{ID: srv.Addr()}

	s, clk, _ := newScraper(t, manualConfig()) // waiting threshold 2
	s.SetEndpoints([]kvroute.Endpoint{ep})
	waitScrapes(t, s, ep, 1)
	sig, ok := s.Signal(ep)
	require.True(t, ok)
	require.Equal(t, Signal{Scraped: t0, Cache: CacheInfo{Reported: true, BlockSize: 4, GPUBlocks: 8192}}, sig)
	sat, known := s.Saturation(ep)
	require.True(t, known)
	require.False(t, sat)

	for i := range 4 {
		longCompletion(t, "http://"+srv.Addr(), i)
	}
	deadline := time.Now().Add(20 * time.Second)
	for sig.Waiting != 3 || sig.Running != 1 {
		require.True(t, time.Now().Before(deadline), "last signal %+v", sig)
		scrapeAgain(t, s, clk, ep)
		sig, ok = s.Signal(ep)
		require.True(t, ok)
	}
	require.Positive(t, sig.KVCacheUsage)
	require.Less(t, sig.KVCacheUsage, 1.0)
	sat, known = s.Saturation(ep)
	require.True(t, known)
	require.True(t, sat)
}

// longCompletion opens a streaming completion that outlasts the test and
// returns once the engine has it (the server answers with headers after
// submitting); the test's end hangs it up.
func longCompletion(t *testing.T, base string, i int) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"model": "m", "prompt": "request " + strings.Repeat("x ", i+1), "max_tokens": 3000, "stream": true})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	go func() { // read to the end: closing the body would hang up
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
	}()
}
