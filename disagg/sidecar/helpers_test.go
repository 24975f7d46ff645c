package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/kvroute/kvroute/telemetry"
)

// startEngine starts a simulated vLLM server with a P/D role on loopback.
func startEngine(t *testing.T, role string) *server.Server {
	t.Helper()
	s, err := server.New(server.Config{Model: "m", Engine: simengine.Config{BlockSize: 4, NumGPUBlocks: 1024,
		DecodeStep: time.Millisecond, PrefillTokensPerSecond: 1e6},
		PD: server.PDConfig{Role: role, TransferTimePerToken: time.Microsecond}}, server.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Start("127.0.0.1:0"))
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// startSidecar serves a Handler in front of decoderURL on loopback.
func startSidecar(t *testing.T, cfg Config) (*Handler, *prometheus.Registry, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	h, err := NewHandler(cfg, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return h, reg, srv.URL
}

var client = &http.Client{Timeout: 30 * time.Second}

func send(t *testing.T, url, prefiller string, body any) (int, http.Header, []byte) {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case []byte:
		b = v
	default:
		var err error
		b, err = json.Marshal(body)
		require.NoError(t, err)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if prefiller != "" {
		req.Header.Set(PrefillerHeader, prefiller)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, out
}

func chat(content string, maxTokens int, stream bool) map[string]any {
	return map[string]any{"model": "m", "max_tokens": maxTokens, "stream": stream,
		"messages": []map[string]any{{"role": "user", "content": content}}}
}

var longPrompt = strings.Repeat("a long shared system prompt about routing ", 16)

type answer struct {
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		Details      struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
