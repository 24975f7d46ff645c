package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// generateRequest writes a GenerateRequest the way vLLM's model_dump_json
// does: every field present, nulls included, token_ids in the middle.
func generateRequest(tokens []uint32, features, salt string) string {
	var b strings.Builder
	b.WriteString(`{"request_id":"chatcmpl-6f1c0e7a","token_ids":[`)
	for i, t := range tokens {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, t)
	}
	b.WriteString(`],"token_offsets":null,"features":`)
	if features == "" {
		features = "null"
	}
	b.WriteString(features)
	b.WriteString(`,"content_parts":null,"sampling_params":{"n":1,"presence_penalty":0.0,"temperature":1.0,"top_p":1.0,` +
		`"max_tokens":1,"min_tokens":0,"stop":[],"stop_token_ids":[],"skip_reading_prefix_cache":null,"logit_bias":null},` +
		`"model":"qwen3-8b","reasoning_ended":null,"reasoning_parser_kwargs":null,"return_token_ids":true,` +
		`"output_mode":"tokens","stream":false,"stream_options":null,"cache_salt":`)
	if salt == "" {
		b.WriteString("null")
	} else {
		s, _ := json.Marshal(salt)
		b.Write(s)
	}
	b.WriteString(`,"priority":0,"kv_transfer_params":null,"ec_transfer_params":null}`)
	return b.String()
}

// textTokens tokenizes like a toy byte-level tokenizer, so that different
// prompts give different IDs.
func textTokens(s string) []uint32 {
	out := make([]uint32, 0, len(s)+2)
	out = append(out, 151644)
	for _, c := range []byte(s) {
		out = append(out, 1000+uint32(c))
	}
	return append(out, 151645)
}

// recorded is one request a fake renderer received.
type recorded struct {
	Path   string
	Body   []byte
	Header http.Header
}

// fakeVLLM is an httptest server answering render routes like vLLM: the
// completions route returns a JSON array with one GenerateRequest per prompt,
// the others one object. Handlers can be overridden per path.
type fakeVLLM struct {
	*httptest.Server
	name string

	mu       sync.Mutex
	requests []recorded
	override map[string]http.HandlerFunc // path -> handler
}

func newFakeVLLM(t testing.TB, name string) *fakeVLLM {
	f := &fakeVLLM{name: name, override: map[string]http.HandlerFunc{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// on overrides the handler of one path.
func (f *fakeVLLM) on(path string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.override[path] = h
}

// hits counts requests to path ("" = all paths).
func (f *fakeVLLM) hits(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if path == "" || r.Path == path {
			n++
		}
	}
	return n
}

func (f *fakeVLLM) last() recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

func (f *fakeVLLM) all() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.requests...)
}

func (f *fakeVLLM) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	f.mu.Lock()
	f.requests = append(f.requests, recorded{Path: r.URL.Path, Body: body, Header: r.Header.Clone()})
	h := f.override[r.URL.Path]
	f.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	vllmRender(w, r)
}

// vllmRender is the default behaviour: render the text of the request.
func vllmRender(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Content-Type") != "application/json" {
		writeError(w, 400, "BadRequestError", "Unsupported Media Type: Only 'application/json' is allowed")
		return
	}
	var req struct {
		Model    string          `json:"model"`
		Prompt   json.RawMessage `json:"prompt"`
		Messages json.RawMessage `json:"messages"`
		Input    json.RawMessage `json:"input"`
		Salt     string          `json:"cache_salt"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, 400, "BadRequestError", err.Error())
		return
	}
	if strings.HasPrefix(req.Model, "unknown") {
		writeError(w, 404, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/completions/render":
		var prompts []string
		var one string
		if json.Unmarshal(req.Prompt, &one) == nil {
			prompts = []string{one}
		} else if json.Unmarshal(req.Prompt, &prompts) != nil {
			writeError(w, 400, "BadRequestError", "unsupported prompt")
			return
		}
		parts := make([]string, len(prompts))
		for i, p := range prompts {
			parts[i] = generateRequest(textTokens(p), "", req.Salt)
		}
		io.WriteString(w, "["+strings.Join(parts, ",")+"]")
	case "/v1/chat/completions/render":
		io.WriteString(w, generateRequest(textTokens(string(req.Messages)), "", req.Salt))
	case "/v1/messages/render":
		io.WriteString(w, generateRequest(textTokens(string(req.Messages)), "", req.Salt))
	case "/v1/responses/render":
		io.WriteString(w, generateRequest(textTokens(string(req.Input)), "", req.Salt))
	default:
		notFound(w)
	}
}

// writeError answers with vLLM's ErrorResponse.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": status}})
	w.Write(b)
}

// notFound answers like FastAPI for a route that is not registered.
func notFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(404)
	io.WriteString(w, `{"detail":"Not Found"}`)
}

func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeError(w, code, "Error", http.StatusText(code))
	}
}

// hang blocks until the client gives up on the request.
func hang(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// newTestClient builds a Client over the given servers (IDs "a", "b", ...
// in order) with a fresh registry.
func newTestClient(t testing.TB, mutate func(*Config), servers ...*fakeVLLM) *Client {
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(cfg, Options{})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	var eps []Endpoint
	for i, s := range servers {
		eps = append(eps, Endpoint{ID: string(rune('a' + i)), URL: s.URL})
	}
	if cfg.URL == "" {
		require.NoError(t, c.SetEndpoints(eps))
	}
	return c
}

// testConfig is DefaultConfig with budgets far past any render the tests
// make, so that a loaded machine does not turn an answer into a timeout;
// the tests of timeouts set their own.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.ModelName = "qwen3-8b"
	cfg.Timeout, cfg.AttemptTimeout = time.Minute, new(time.Minute)
	return cfg
}

func completions(prompt string) *Request {
	b, _ := json.Marshal(map[string]any{"model": "qwen3-8b", "prompt": prompt})
	return &Request{API: APICompletions, Body: b}
}

func chat(text string) *Request {
	b, _ := json.Marshal(map[string]any{"model": "qwen3-8b", "messages": []any{map[string]any{"role": "user", "content": text}}})
	return &Request{API: APIChatCompletions, Body: b}
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// renderOrHang returns the error of c.Render(ctx, req), failing the test if
// it has not returned within 30 s. Tests give the client a budget of a
// minute and ctx a deadline of milliseconds, so only ctx can end the render
// that soon: a render that ignores ctx is caught, and a slow machine does
// not fail the test.
func renderOrHang(t *testing.T, c *Client, ctx context.Context, req *Request) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := c.Render(ctx, req)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the render outlived its caller's deadline")
		return nil
	}
}
