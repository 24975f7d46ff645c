package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// startSplit starts a prefill and a decode engine and a sidecar in front
// of the decoder: the setup of the tests that split a request end to end.
// reg holds the sidecar's metrics, url is its base URL.
func startSplit(t *testing.T) (pre, dec *server.Server, reg *prometheus.Registry, url string) {
	t.Helper()
	pre, dec = startEngine(t, server.RolePrefill), startEngine(t, server.RoleDecode)
	_, reg, url = startSidecar(t, Config{DecoderURL: "http://" + dec.Addr()})
	return pre, dec, reg, url
}

// requireStreamedSplit sends the streamed request body to the sidecar's
// path naming pre as the prefiller and checks the decoder's answer streams
// through: an event stream of tokens events named delta that ends with
// the event named end, pre having generated prefills tokens in all (one a
// prefill).
func requireStreamedSplit(t *testing.T, url, path string, pre *server.Server, body any, delta, end string, tokens int, prefills uint64) {
	t.Helper()
	code, hdr, b := send(t, url+path, pre.Addr(), body)
	require.Equal(t, http.StatusOK, code, string(b))
	require.Contains(t, hdr.Get("Content-Type"), "text/event-stream")
	require.Equal(t, tokens, strings.Count(string(b), "event: "+delta), string(b))
	require.Contains(t, string(b), "event: "+end)
	require.Equal(t, prefills, pre.Engine().Stats().GenerationTokens, "one token per prefill")
}

// bodyRecorder is a fake engine on loopback that keeps the JSON body of
// the last request it got and answers with a fixed body: what a test of
// the prefill and decode bodies reads.
type bodyRecorder struct {
	addr string // host:port
	mu   sync.Mutex
	last map[string]json.RawMessage
}

// startBodyRecorder answers a request with a JSON body for path ("": any
// path) with answer, and any other request 400 Bad Request.
func startBodyRecorder(t *testing.T, path, answer string) *bodyRecorder {
	t.Helper()
	rec := &bodyRecorder{}
	rec.addr = fakePrefiller(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var got map[string]json.RawMessage
		if (path != "" && r.URL.Path != path) || json.Unmarshal(b, &got) != nil {
			got = nil
		}
		rec.mu.Lock()
		rec.last = got
		rec.mu.Unlock()
		if got == nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answer))
	})
	return rec
}

// body returns the fields of the last request's JSON body (nil when it
// was refused).
func (rec *bodyRecorder) body() map[string]json.RawMessage {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.last
}
