package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

const testModel = "test-model"

// upstream is a fake vLLM engine: it renders like vLLM (one token per prompt
// byte, so the router can key the prompt) and answers inference routes with
// a handler the test sets.
type upstream struct {
	*httptest.Server
	id string

	mu       sync.Mutex
	bodies   [][]byte
	headers  []http.Header
	inferFn  http.HandlerFunc
	rendered int
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.inferFn = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" ok"}]}`)
	}
	// On a port outside the ephemeral range (testport): a test that closes
	// the engine sees its address refused, not answered by another socket
	// that took the port meanwhile.
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	_ = u.Listener.Close()
	u.Listener = testport.Listen(t, "127.0.0.1")
	u.Start()
	u.id = strings.TrimPrefix(u.URL, "http://")
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if strings.HasSuffix(r.URL.Path, "/render") {
		u.mu.Lock()
		u.rendered++
		u.mu.Unlock()
		var req struct {
			Prompt string `json:"prompt"`
		}
		if err := json.Unmarshal(body, &req); err != nil || r.URL.Path != "/v1/completions/render" {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"unsupported","type":"BadRequestError","param":null,"code":400}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `[{"request_id":"r","token_ids":%s}]`, tokenJSON(promptTokens(req.Prompt)))
		return
	}
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	u.headers = append(u.headers, r.Header.Clone())
	fn := u.inferFn
	u.mu.Unlock()
	fn(w, r)
}

func (u *upstream) setInfer(fn http.HandlerFunc) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.inferFn = fn
}

func (u *upstream) received() ([][]byte, []http.Header) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.bodies...), append([]http.Header(nil), u.headers...)
}

// promptTokens is the fake renderer's tokenizer: one token per byte.
func promptTokens(s string) []uint32 {
	out := make([]uint32, len(s))
	for i := range len(s) {
		out[i] = 1000 + uint32(s[i])
	}
	return out
}

func tokenJSON(ts []uint32) string {
	b, _ := json.Marshal(ts)
	return string(b)
}

// harness is a gateway (Handler on an httptest server, routed by a real
// Router without events) in front of fake engines.
type harness struct {
	t       *testing.T
	router  *kvroute.Router
	reg     *prometheus.Registry
	handler *Handler
	gw      *httptest.Server
	ups     []*upstream
	eps     []kvroute.Endpoint
	client  *http.Client
}

func newHarness(t *testing.T, n int, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, reg: prometheus.NewRegistry(), client: &http.Client{Transport: &http.Transport{}}}
	for range n {
		u := newUpstream(t)
		h.ups = append(h.ups, u)
		h.eps = append(h.eps, kvroute.Endpoint{ID: u.id})
	}
	rcfg := kvroute.DefaultConfig()
	rcfg.Model = testModel
	rcfg.Events.Enabled = new(false)
	var err error
	h.router, err = kvroute.New(context.Background(), rcfg, kvroute.Options{Set: telemetry.Set{Registerer: h.reg}})
	require.NoError(t, err)
	require.NoError(t, h.router.SetEndpoints(h.eps))
	if cfg.Model == "" {
		cfg.Model = testModel
	}
	h.handler, err = New(cfg, h.router, Options{Set: telemetry.Set{Registerer: h.reg}})
	require.NoError(t, err)
	h.handler.SetEndpoints(h.eps)
	h.gw = httptest.NewServer(h.handler)
	return h
}

// close stops everything the harness started, gateway first.
func (h *harness) close() {
	h.client.CloseIdleConnections()
	h.gw.Close()
	h.handler.Close()
	for _, u := range h.ups {
		u.Close()
	}
	h.router.Close()
}

// post sends body to the gateway's path.
func (h *harness) post(path, body string) *http.Response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.gw.URL+path, strings.NewReader(body))
	require.NoError(h.t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	require.NoError(h.t, err)
	return resp
}

// load returns the router's in-flight tokens and requests for endpoint.
func (h *harness) load(endpoint string) (int64, int64) {
	tok, reqs, _ := h.router.Load().Load(endpoint)
	return tok, reqs
}

// warm records in the router's index that endpoint caches prompt, as the
// engine's BlockStored events would.
func (h *harness) warm(endpoint, prompt string) {
	h.t.Helper()
	tokens := promptTokens(prompt)
	bs := h.router.Index().BlockSize()
	n := len(tokens) / bs
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = 0xbeef0000 + uint64(i)
	}
	require.NoError(h.t, h.router.Index().Store(endpoint, &kvindex.StoreEvent{
		EngineHashes: hashes, Tokens: tokens[:n*bs], BlockSize: bs, Model: testModel, Group: -1,
	}))
}

func completionsBody(prompt string, stream bool) string {
	b, _ := json.Marshal(map[string]any{"model": testModel, "prompt": prompt, "max_tokens": 8, "stream": stream})
	return string(b)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err := io.Copy(&buf, resp.Body)
	require.NoError(t, err)
	return buf.String()
}
