package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	require.True(t, errors.As(err, &e), "not a *render.Error: %v", err)
	return e
}

func TestRenderCompletionsArrayAndChatObject(t *testing.T) {
	s := newFakeVLLM(t, "a")
	c := newTestClient(t, nil, s)

	b := []byte(`{"model":"qwen3-8b","prompt":["hi","yo"]}`)
	res, err := c.Render(context.Background(), &Request{API: APICompletions, Body: b})
	require.NoError(t, err)
	require.Len(t, res.Prompts, 2)
	require.Equal(t, textTokens("hi"), res.Prompts[0].TokenIDs)
	require.Equal(t, textTokens("yo"), res.Prompts[1].TokenIDs)
	require.Equal(t, "a", res.Endpoint)

	res, err = c.Render(context.Background(), chat("hello"))
	require.NoError(t, err)
	require.Len(t, res.Prompts, 1)
	require.Equal(t, "/v1/chat/completions/render", s.last().Path)
}

// RenderInto overwrites its Result and renders into the token arrays it
// already holds: a second, shorter prompt allocates none, a longer one gets
// its own, and a salt or second prompt of an earlier answer does not stay.
func TestRenderIntoReusesTheTokenArrays(t *testing.T) {
	s := newFakeVLLM(t, "a")
	c := newTestClient(t, nil, s)
	var res Result
	two := []byte(`{"model":"qwen3-8b","prompt":["a long first prompt","yo"],"cache_salt":"t1"}`)
	require.NoError(t, c.RenderInto(context.Background(), &Request{API: APICompletions, Body: two}, &res))
	require.Len(t, res.Prompts, 2)
	require.Equal(t, "t1", res.CacheSalt)
	first := &res.Prompts[0].TokenIDs[0]

	require.NoError(t, c.RenderInto(context.Background(), completions("short"), &res))
	require.Len(t, res.Prompts, 1)
	require.Equal(t, textTokens("short"), res.Prompts[0].TokenIDs)
	require.Same(t, first, &res.Prompts[0].TokenIDs[0], "the first prompt's array is reused")
	require.Empty(t, res.CacheSalt)
	require.Equal(t, "a", res.Endpoint)

	long := strings.Repeat("x", 100)
	require.NoError(t, c.RenderInto(context.Background(), completions(long), &res))
	require.Equal(t, textTokens(long), res.Prompts[0].TokenIDs)

	answer := []byte(`[` + generateRequest(textTokens("short"), "", "") + `]`)
	allocs := testing.AllocsPerRun(20, func() { _ = decodeResponse(answer, true, math.MaxInt, false, &res) })
	// The one allocation left is the 32-byte scanner, not a token array.
	require.LessOrEqual(t, allocs, 1.0, "decoding into a reused Result allocates no token array")
	require.Error(t, c.RenderInto(context.Background(), &Request{API: "nope"}, &res))
}

func TestRenderMultimodalFeaturesAndSalt(t *testing.T) {
	s := newFakeVLLM(t, "a")
	s.on("/v1/chat/completions/render", func(w http.ResponseWriter, r *http.Request) {
		toks := []uint32{151644, 872, 198, 151652, 151655, 151655, 151653, 151652, 151655, 151653, 3838, 151645}
		f := `{"mm_hashes":{"image":["3f0c","9ab1"]},"mm_placeholders":{"image":[{"offset":8,"length":1},{"offset":4,"length":2}]},"kwargs_data":null,"mm_metadata":null}`
		fmt.Fprint(w, generateRequest(toks, f, "from-response"))
	})
	c := newTestClient(t, nil, s)

	res, err := c.Render(context.Background(), chat("look"))
	require.NoError(t, err)
	require.Equal(t, []MMFeature{
		{Modality: "image", Hash: "9ab1", Offset: 4, Length: 2},
		{Modality: "image", Hash: "3f0c", Offset: 8, Length: 1},
	}, res.Prompts[0].Features)
	require.Equal(t, "from-response", res.CacheSalt, "without a request salt the response's is used")

	body := []byte(`{"model":"qwen3-8b","messages":[],"cache_salt":"tenant-42"}`)
	res, err = c.Render(context.Background(), &Request{API: APIChatCompletions, Body: body})
	require.NoError(t, err)
	require.Equal(t, "tenant-42", res.CacheSalt, "the request's salt wins")
}

func TestRenderForwardsBodyAndHeaders(t *testing.T) {
	s := newFakeVLLM(t, "a")
	c := newTestClient(t, func(c *Config) { c.PrefillOnly = true }, s)

	body := []byte(`{"model":"qwen3-8b", "max_tokens": 512, "messages":[{"role":"user","content":"caf\u00e9 \ud83d\ude00 <b>"}]}`)
	orig := append([]byte(nil), body...)
	_, err := c.Render(context.Background(), &Request{API: APIChatCompletions, Body: body, Authorization: "Bearer sk-test"})
	require.NoError(t, err)
	got := s.last()
	require.Equal(t, "Bearer sk-test", got.Header.Get("Authorization"))
	require.Equal(t, "application/json", got.Header.Get("Content-Type"))
	require.Equal(t, `{"model":"qwen3-8b", "max_tokens": 1, "messages":[{"role":"user","content":"caf\u00e9 \ud83d\ude00 <b>"}],"return_mm_kwargs":false}`, string(got.Body))
	require.Equal(t, orig, body, "the caller's body is never modified")

	_, err = c.Render(context.Background(), chat("x"))
	require.NoError(t, err)
	require.Empty(t, s.last().Header.Values("Authorization"))
}

func TestRenderUsesHTTP1(t *testing.T) {
	protos := make(chan string, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos <- r.Proto
		fmt.Fprint(w, generateRequest([]uint32{1}, "", ""))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.URL = srv.URL
	c, err := New(cfg, Options{TLSConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Render(context.Background(), chat("x"))
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1", <-protos)
}

func TestMetricsSuccessAndBuckets(t *testing.T) {
	s := newFakeVLLM(t, "a")
	reg := prometheus.NewRegistry()
	c, err := New(DefaultConfig(), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: s.URL}}))
	_, err = c.Render(context.Background(), completions("x"))
	require.NoError(t, err)
	require.Equal(t, 1, histCount(t, reg, "success"))

	// A second Client on the same registry shares the collectors.
	c2, err := New(DefaultConfig(), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer c2.Close()
	require.NoError(t, c2.SetEndpoints([]Endpoint{{ID: "a", URL: s.URL}}))
	_, err = c2.Render(context.Background(), completions("x"))
	require.NoError(t, err)
	require.Equal(t, 2, histCount(t, reg, "success"))

	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == MetricDuration {
			var bounds []float64
			for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
			require.Equal(t, []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60}, bounds)
		}
	}
}

func TestFailureLogIsRateLimited(t *testing.T) {
	s := newFakeVLLM(t, "a")
	s.on("/v1/completions/render", status(400))
	var logs logBuffer
	clk := telemetry.NewManual(time.Unix(1000, 0))
	c, err := New(DefaultConfig(), Options{Set: telemetry.Set{Logger: logs.logger(), Clock: clk}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: s.URL}}))

	for range 5 {
		_, err := c.Render(context.Background(), completions("x"))
		require.Error(t, err)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "render failed"))
	clk.Advance(10 * time.Second) // the rate limit runs on the client's clock
	_, err = c.Render(context.Background(), completions("x"))
	require.Error(t, err)
	require.Equal(t, 2, strings.Count(logs.String(), "render failed"))
	require.Contains(t, logs.String(), "reason=status")
}

func TestConcurrentRenderAndSetEndpoints(t *testing.T) {
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	a.on("/v1/completions/render", status(503)) // every other call retries
	c := newTestClient(t, func(c *Config) { c.MessagesRenderMode = ModeAuto }, a, b)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 40 {
				var req *Request
				switch (g + i) % 3 {
				case 0:
					req = completions("x")
				case 1:
					req = chat("y")
				default:
					req = &Request{API: APIMessages, Body: []byte(`{"model":"qwen3-8b","max_tokens":5,"messages":[{"role":"user","content":"z"}]}`)}
				}
				_, err := c.Render(context.Background(), req)
				assert.NoError(t, err)
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			eps := []Endpoint{{ID: "a", URL: a.URL}, {ID: "b", URL: b.URL}}
			if i%2 == 1 {
				eps = eps[1:]
			}
			assert.NoError(t, c.SetEndpoints(eps))
			_ = c.Endpoints()
		}
	})
	wg.Wait()
}

func TestCloseRejectsCallsAndLeaksNothing(t *testing.T) {
	defer leakcheck.Check(t)()
	s := httptest.NewServer(http.HandlerFunc(vllmRender))
	defer s.Close()
	c, err := New(DefaultConfig(), Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}})
	require.NoError(t, err)
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: s.URL}}))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := c.Render(context.Background(), completions("warm"))
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	c.Close()
	c.Close()
	_, err = c.Render(context.Background(), completions("x"))
	require.ErrorIs(t, err, ErrClosed)
}

func failures(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != MetricFailures {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{reason=%q}", MetricFailures, reason)
	return 0
}

func histCount(t *testing.T, reg *prometheus.Registry, result string) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != MetricDuration {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return int(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func TestAPIForPath(t *testing.T) {
	for path, want := range map[string]API{
		"/v1/completions": APICompletions, "/v1/chat/completions": APIChatCompletions,
		"/v1/messages": APIMessages, "/v1/responses/": APIResponses,
	} {
		got, ok := APIForPath(path)
		require.True(t, ok, path)
		require.Equal(t, want, got)
	}
	_, ok := APIForPath("/v1/embeddings")
	require.False(t, ok)
}

// TestMessagesSaltIsTheRenderersOnly: vLLM's Anthropic request model has no
// cache_salt and its translation to a chat request sets none, so the engine
// caches a Messages prompt unsalted. A Messages request's own cache_salt is
// not the salt of its blocks, natively or translated; the renderer's answer
// is. Responses and chat keep the request's salt.
func TestMessagesSaltIsTheRenderersOnly(t *testing.T) {
	for _, mode := range []Mode{ModeNative, ModeLegacy} {
		t.Run(string(mode), func(t *testing.T) {
			s := newFakeVLLM(t, "a")
			answer := func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				salt := ""
				if bytes.Contains(b, []byte("salted")) {
					salt = "from-renderer"
				}
				w.Write([]byte(generateRequest([]uint32{1, 2, 3}, "", salt)))
			}
			s.on(messagesPath, answer)
			s.on(chatPath, answer)
			c := newTestClient(t, func(c *Config) { c.MessagesRenderMode = mode }, s)
			body := []byte(`{"model":"m","max_tokens":8,"cache_salt":"tenant-42","messages":[{"role":"user","content":"hi"}]}`)

			res, err := c.Render(context.Background(), &Request{API: APIMessages, Body: body, Model: "m"})
			require.NoError(t, err)
			require.Empty(t, res.CacheSalt, "vLLM ignores a Messages request's cache_salt")

			body = bytes.Replace(body, []byte(`"hi"`), []byte(`"salted"`), 1)
			res, err = c.Render(context.Background(), &Request{API: APIMessages, Body: body, Model: "m"})
			require.NoError(t, err)
			require.Equal(t, "from-renderer", res.CacheSalt, "a renderer that salts says so")
		})
	}
}

// PrefillOnly caps the output of the render copy in each API's own member:
// max_tokens (and max_completion_tokens, min_tokens) for completions, chat
// and Messages, max_output_tokens for a Responses request rendered natively,
// which has no max_tokens (vLLM's ResponsesRequest ignores one, logging the
// ignored field on every request, and reads max_output_tokens). A Responses
// request without max_output_tokens asks for the context's rest, which fits
// by definition: nothing is added. In legacy mode the chat
// translation gets the chat edits.
func TestRenderPrefillOnlyCapsEveryAPIsOutputMember(t *testing.T) {
	s := newFakeVLLM(t, "a")
	native := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"request_id":"resp-1","token_ids":[1,2,3]}`)
	}
	s.on(responsesPath, native)
	s.on(messagesPath, native)
	c := newTestClient(t, func(c *Config) {
		c.PrefillOnly, c.OmitMMKwargs = true, new(false)
		c.ResponsesRenderMode, c.MessagesRenderMode = ModeNative, ModeNative
	}, s)
	for _, tc := range []struct {
		api        API
		path       string
		body, want string
	}{
		{APIResponses, responsesPath, `{"model":"m","input":"hi","max_output_tokens":4096}`, `{"model":"m","input":"hi","max_output_tokens":1}`},
		{APIResponses, responsesPath, `{"model":"m","input":"hi","max_output_tokens":1}`, `{"model":"m","input":"hi","max_output_tokens":1}`},
		{APIResponses, responsesPath, `{"model":"m","input":"hi","max_output_tokens":null}`, `{"model":"m","input":"hi","max_output_tokens":null}`},
		{APIResponses, responsesPath, `{"model":"m","input":"hi"}`, `{"model":"m","input":"hi"}`},
		{APIResponses, responsesPath, `{"model":"m","input":"hi","truncate_prompt_tokens":8,"max_output_tokens":64}`, `{"model":"m","input":"hi","truncate_prompt_tokens":8,"max_output_tokens":64}`},
		{APIMessages, messagesPath, `{"model":"m","max_tokens":4096,"messages":[]}`, `{"model":"m","max_tokens":1,"messages":[]}`},
		{APIChatCompletions, chatPath, `{"model":"m","max_completion_tokens":4096,"messages":[]}`, `{"model":"m","max_completion_tokens":1,"messages":[],"max_tokens":1}`},
	} {
		_, err := c.Render(context.Background(), &Request{API: tc.api, Body: []byte(tc.body)})
		require.NoError(t, err, tc.body)
		got := s.last()
		require.Equal(t, tc.path, got.Path)
		require.Equal(t, tc.want, string(got.Body), tc.body)
	}
}
