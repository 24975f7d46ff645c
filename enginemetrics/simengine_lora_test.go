package enginemetrics

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// The Scraper reads the simulated engine's real vllm:lora_requests_info:
// after requests for "sql" then "chat" on an engine with two slots, the
// latest series names both, with max_lora 2.
func TestScrapesTheSimulatedEngineLoRA(t *testing.T) {
	srv, err := server.New(server.Config{Model: "m", LoRAModules: []string{"sql", "chat"}, Engine: simengine.Config{
		BlockSize: 4, NumGPUBlocks: 1024, DecodeStep: time.Millisecond, PrefillTokensPerSecond: 1e6,
		LoRA: &simengine.LoRAConfig{MaxLoRAs: 2, LoadTime: time.Millisecond},
	}}, server.Options{})
	require.NoError(t, err)
	require.NoError(t, srv.Start("127.0.0.1:0"))
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	for _, model := range []string{"sql", "chat"} {
		b, err := json.Marshal(map[string]any{"model": model, "prompt": "hello", "max_tokens": 1})
		require.NoError(t, err)
		resp, err := http.Post("http://"+srv.Addr()+"/v1/completions", "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	ep := kvroute.Endpoint{ID: srv.Addr()}
	s, _, _ := newScraper(t, manualConfig())
	s.SetEndpoints([]kvroute.Endpoint{ep})
	waitScrapes(t, s, ep, 1)
	l, ok := s.LoRA(ep)
	require.True(t, ok)
	require.True(t, l.Reported)
	require.Equal(t, 2, l.MaxLoRA)
	require.Equal(t, []string{"chat"}, l.Running, "the newest series: the last request's iteration")
	require.Positive(t, l.Timestamp)
}
