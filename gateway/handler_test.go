package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

const wait = 10 * time.Second

// awaitCounted waits for kvroute_gateway_requests_total{api,result} to
// reach n: a request is counted as its handler returns, which may be after
// the client read the answer.
func awaitCounted(t *testing.T, reg *prometheus.Registry, api string, result Result, n float64) {
	t.Helper()
	require.Eventually(t, func() bool { return counter(t, reg, api, result) == n }, wait, time.Millisecond, result)
}

// requireFailuresCounted closes the harness's one engine and sends (502,
// counted upstream_unreachable), then removes every endpoint and sends
// (503, counted no_endpoint), each counted under api.
func requireFailuresCounted(t *testing.T, h *harness, api string, send func() int) {
	t.Helper()
	h.ups[0].Close() // refused from now on (testport)
	require.Equal(t, http.StatusBadGateway, send())
	awaitCounted(t, h.reg, api, ResultUpstreamUnreachable, 1)
	h.handler.SetEndpoints(nil)
	require.Equal(t, http.StatusServiceUnavailable, send())
	awaitCounted(t, h.reg, api, ResultNoEndpoint, 1)
}

// counter reads kvroute_gateway_requests_total{api,result} from reg.
func counter(t *testing.T, reg *prometheus.Registry, api string, result Result) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_gateway_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["api"] == api && labels["result"] == string(result) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func TestGatewayRoutesToTheCacheWarmEndpointAndReleasesLoad(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 3, Config{})
	defer h.close()
	prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12) // 540 tokens, 8 full blocks
	warm := h.eps[1].ID
	h.warm(warm, prompt)

	for range 3 {
		body := completionsBody(prompt, false)
		resp := h.post("/v1/completions", body)
		got := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, got)
		require.JSONEq(t, `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" ok"}]}`, got)
		require.Equal(t, warm, resp.Header.Get(HeaderEndpoint))
		require.Equal(t, "540", resp.Header.Get(HeaderPromptTokens))
		require.Equal(t, "512", resp.Header.Get(HeaderCachedTokens))
	}
	bodies, _ := h.ups[1].received()
	require.Len(t, bodies, 3)
	require.Equal(t, completionsBody(prompt, false), string(bodies[0]), "the body is forwarded byte for byte")
	for _, u := range []*upstream{h.ups[0], h.ups[2]} {
		b, _ := u.received()
		require.Empty(t, b)
	}
	require.Eventually(t, func() bool { tok, n := h.load(warm); return tok == 0 && n == 0 }, wait, time.Millisecond)
	require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultSuccess) == 3 }, wait, time.Millisecond)
}

func TestGatewayForwardsHeadersWithoutHopByHopFields(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	target := make(chan string, 1)
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		target <- r.Host + " " + r.URL.RequestURI()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Connection", "X-Engine-Hop")
		w.Header().Set("X-Engine-Hop", "1")
		w.Header().Set("X-Request-Id", "engine-id")
		io.WriteString(w, `{}`)
	})
	req, err := http.NewRequest(http.MethodPost, h.gw.URL+"/v1/chat/completions?x=1",
		strings.NewReader(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Connection", "X-Client-Hop")
	req.Header.Set("X-Client-Hop", "1")
	req.Header.Set("X-Forwarded-For", "10.9.9.9")
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "engine-id", resp.Header.Get("X-Request-Id"))
	require.Empty(t, resp.Header.Get("X-Engine-Hop"))

	_, hdrs := h.ups[0].received()
	require.Len(t, hdrs, 1)
	require.Equal(t, "Bearer secret", hdrs[0].Get("Authorization"))
	require.Empty(t, hdrs[0].Get("X-Client-Hop"))
	require.Equal(t, "10.9.9.9, 127.0.0.1", hdrs[0].Get("X-Forwarded-For"))
	require.Equal(t, "http", hdrs[0].Get("X-Forwarded-Proto"))
	require.Equal(t, h.eps[0].ID+" /v1/chat/completions?x=1", <-target, "the engine sees the path and query, addressed to itself")
}

func TestGatewayStreamsEachChunkAsItArrives(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	ep := h.eps[0].ID
	arrived, sendFirst, sendRest := make(chan struct{}), make(chan struct{}), make(chan struct{})
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-sendFirst
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-sendRest:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: {\"n\":2}\n\ndata: [DONE]\n\n")
	})

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	respc := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.gw.URL+"/v1/completions",
			strings.NewReader(completionsBody(strings.Repeat("stream me ", 30), true)))
		resp, err := h.client.Do(req)
		if err != nil {
			close(respc)
			return
		}
		respc <- resp
	}()

	recv(t, arrived, "the request at the engine")
	tok, n := h.load(ep)
	require.Equal(t, int64(300), tok, "the prompt's uncached tokens are committed until the first chunk")
	require.Equal(t, int64(1), n)

	close(sendFirst)
	resp := recv(t, respc, "the response header")
	require.NotNil(t, resp)
	defer resp.Body.Close()
	require.Equal(t, ep, resp.Header.Get(HeaderEndpoint))
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err, "the first event must arrive before the engine sends the second")
	require.Equal(t, "data: {\"n\":1}\n", line)

	tok, n = h.load(ep)
	require.Equal(t, int64(0), tok, "the first chunk releases the prompt tokens")
	require.Equal(t, int64(1), n, "the request stays open until the stream ends")

	close(sendRest)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	require.Equal(t, "\ndata: {\"n\":2}\n\ndata: [DONE]\n\n", string(rest))
	require.Eventually(t, func() bool { tok, n := h.load(ep); return tok == 0 && n == 0 }, wait, time.Millisecond)
	require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultSuccess) == 1 }, wait, time.Millisecond)
}

func TestGatewayReleasesLoadWhenTheClientAbortsMidStream(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	ep := h.eps[0].ID
	engineSawCancel, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(engineSawCancel)
		case <-release:
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.gw.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"test-model","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	require.NoError(t, err)
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "data: {\"n\":1}\n", line)
	_, n := h.load(ep)
	require.Equal(t, int64(1), n)

	cancel()
	resp.Body.Close()
	require.Eventually(t, func() bool { tok, n := h.load(ep); return tok == 0 && n == 0 }, wait, time.Millisecond)
	recv(t, engineSawCancel, "the engine to see the request cancelled")
	require.Eventually(t, func() bool { return counter(t, h.reg, "chat_completions", ResultClientAbort) == 1 }, wait, time.Millisecond)
}

func TestGatewayAbortsTheClientWhenTheEngineBreaksOff(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	ep := h.eps[0].ID
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "0123456789")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the engine dies mid-body
	})
	resp := h.post("/v1/completions", completionsBody("hi", false))
	_, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Error(t, err, "a truncated body must not look complete")
	require.Eventually(t, func() bool { tok, n := h.load(ep); return tok == 0 && n == 0 }, wait, time.Millisecond)
	require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultUpstreamBroken) == 1 }, wait, time.Millisecond)
}

func TestGatewayPassesEngineErrorsThrough(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"max_tokens too large","type":"BadRequestError","param":null,"code":400}}`)
	})
	resp := h.post("/v1/completions", completionsBody("hi", false))
	got := readAll(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, got, "max_tokens too large")
	require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultUpstreamStatus) == 1 }, wait, time.Millisecond)
	require.Eventually(t, func() bool { tok, n := h.load(h.eps[0].ID); return tok == 0 && n == 0 }, wait, time.Millisecond)
}

func TestGatewayAnswers502WhenTheEngineIsUnreachable(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	h.ups[0].Close()
	resp := h.post("/v1/messages", `{"model":"test-model","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	got := readAll(t, resp)
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(got), &e), got)
	require.Equal(t, "error", e.Type, "Messages errors use Anthropic's shape")
	require.Eventually(t, func() bool { return counter(t, h.reg, "messages", ResultUpstreamUnreachable) == 1 }, wait, time.Millisecond)
	require.Eventually(t, func() bool { tok, n := h.load(h.eps[0].ID); return tok == 0 && n == 0 }, wait, time.Millisecond)
}

func TestGatewayRejectsBodiesOverTheLimit(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{MaxBodyBytes: 1024})
	defer h.close()
	big := completionsBody(strings.Repeat("a", 2000), false)

	resp := h.post("/v1/completions", big)
	got := readAll(t, resp)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	var oa struct {
		Error struct {
			Message string `json:"message"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(got), &oa), got)
	require.Equal(t, 413, oa.Error.Code)
	require.Contains(t, oa.Error.Message, "1024 bytes")

	resp = h.post("/v1/messages", big)
	got = readAll(t, resp)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.JSONEq(t, `{"type":"error","error":{"type":"request_too_large","message":"request body exceeds the gateway's limit of 1024 bytes"}}`, got)

	resp = h.post("/v1/completions", completionsBody(strings.Repeat("a", 900), false))
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a body under the limit passes")

	require.Equal(t, 1.0, counter(t, h.reg, "completions", ResultBodyTooLarge))
	require.Equal(t, 1.0, counter(t, h.reg, "messages", ResultBodyTooLarge))
	bodies, _ := h.ups[0].received()
	require.Len(t, bodies, 1, "rejected bodies never reach an engine")
}

func TestGatewayRejectsBadRequests(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"not JSON", http.MethodPost, "/v1/completions", `{"model":`, http.StatusBadRequest},
		{"JSON array", http.MethodPost, "/v1/responses", `[1,2]`, http.StatusBadRequest},
		{"GET on an inference route", http.MethodGet, "/v1/chat/completions", "", http.StatusMethodNotAllowed},
		{"unknown route", http.MethodPost, "/v1/embeddings", `{}`, http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, h.gw.URL+c.path, strings.NewReader(c.body))
			require.NoError(t, err)
			resp, err := h.client.Do(req)
			require.NoError(t, err)
			got := readAll(t, resp)
			require.Equal(t, c.status, resp.StatusCode, got)
			require.Contains(t, got, `"error"`)
		})
	}
	require.Equal(t, 1.0, counter(t, h.reg, "completions", ResultBadRequest))
	require.Equal(t, 1.0, counter(t, h.reg, "responses", ResultBadRequest))
	require.Equal(t, 1.0, counter(t, h.reg, "chat_completions", ResultBadRequest), "a method other than POST")
	require.Equal(t, 1.0, metricValue(t, h.reg, "kvroute_gateway_unrouted_requests_total"))
	bodies, _ := h.ups[0].received()
	require.Empty(t, bodies)

	h.handler.SetEndpoints(nil)
	resp := h.post("/v1/completions", completionsBody("hi", false))
	readAll(t, resp)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, 1.0, counter(t, h.reg, "completions", ResultNoEndpoint))
}

// capturePicker records the requests it is asked to route.
type capturePicker struct {
	RoundRobin
	reqs chan *kvroute.Request
}

func (c *capturePicker) Pick(ctx context.Context, req *kvroute.Request, eps []kvroute.Endpoint) (*kvroute.Decision, error) {
	c.reqs <- req
	return c.RoundRobin.Pick(ctx, req, eps)
}

func TestGatewayTellsThePickerTheAPIModelAndAdapter(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	for _, c := range []struct {
		base, body, wantModel, wantLoRA string
	}{
		{"base", "base", "", ""},
		{"base", "my-adapter", "", "my-adapter"},
		{"base", "", "", ""},
		{"", "whatever", "whatever", ""},
	} {
		p := &capturePicker{reqs: make(chan *kvroute.Request, 1)}
		h, err := New(Config{Model: c.base}, p, Options{})
		require.NoError(t, err)
		h.SetEndpoints([]kvroute.Endpoint{{ID: u.id}})
		body := `{"model":"` + c.body + `","input":"hi"}`
		req, _ := http.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer k")
		req.RemoteAddr = "127.0.0.1:1234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		got := <-p.reqs
		require.Equal(t, render.APIResponses, got.API)
		require.Equal(t, body, string(got.Body))
		require.Equal(t, "Bearer k", got.Header.Get("Authorization"))
		require.Equal(t, c.wantModel, got.Model, "base %q body %q", c.base, c.body)
		require.Equal(t, c.wantLoRA, got.LoRA, "base %q body %q", c.base, c.body)
		h.Close()
	}
}

func TestGatewayForwardsModelListing(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 2, Config{})
	defer h.close()
	for _, u := range h.ups {
		u.setInfer(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"object":"list","data":[{"id":"test-model"}]}`)
		})
	}
	for range 2 {
		resp, err := h.client.Get(h.gw.URL + "/v1/models")
		require.NoError(t, err)
		require.JSONEq(t, `{"object":"list","data":[{"id":"test-model"}]}`, readAll(t, resp))
	}
	for _, u := range h.ups {
		b, _ := u.received()
		require.Len(t, b, 1, "the listing goes to the endpoints in turn")
	}
}

// GET /v1/models/ (a trailing slash) is the listing too, and reaches the
// engine by its own path: vLLM would redirect the slashed path to its own
// address, past the gateway.
func TestGatewayForwardsModelListingWithATrailingSlash(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	paths := make(chan string, 2)
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
		io.WriteString(w, `{"object":"list","data":[{"id":"test-model"}]}`)
	})
	resp, err := h.client.Get(h.gw.URL + "/v1/models/")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"object":"list","data":[{"id":"test-model"}]}`, readAll(t, resp))
	require.Equal(t, "/v1/models", recv(t, paths, "the engine's request"))
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(Config{}, nil, Options{})
	require.Error(t, err)
	_, err = New(Config{MaxBodyBytes: -1}, new(RoundRobin), Options{})
	require.Error(t, err)
}

// The router accounts load by request ID, so a second request with the
// X-Request-Id of one still in flight is refused with 409; once the first
// ends, the ID may be used again.
func TestGatewayRefusesAnXRequestIdAlreadyInFlight(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	started, release := make(chan struct{}, 1), make(chan struct{})
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[]}`)
	})
	send := func() *http.Response {
		req, err := http.NewRequest(http.MethodPost, h.gw.URL+"/v1/completions", strings.NewReader(completionsBody("hello", false)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", "req-7")
		resp, err := h.client.Do(req)
		require.NoError(t, err)
		return resp
	}
	first := make(chan *http.Response, 1)
	go func() { first <- send() }()
	recv(t, started, "the first request to reach the engine")
	dup := send()
	got := readAll(t, dup)
	require.Equal(t, http.StatusConflict, dup.StatusCode, got)
	require.Contains(t, got, "X-Request-Id")
	close(release)
	resp := <-first
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool { return h.router.Requests().Len() == 0 }, wait, time.Millisecond)
	again := send()
	readAll(t, again)
	require.Equal(t, http.StatusOK, again.StatusCode, "the ID is free again")
	require.Equal(t, 1.0, counter(t, h.reg, "completions", ResultBadRequest))
}

// errPicker fails every Pick with err.
type errPicker struct{ err error }

func (p errPicker) Pick(context.Context, *kvroute.Request, []kvroute.Endpoint) (*kvroute.Decision, error) {
	return nil, p.err
}

// A request whose model no endpoint serves is the client's mistake, answered
// 404 as vLLM answers a model it does not serve, not a missing endpoint
// (503).
func TestGatewayAnswersAModelMismatchWith404(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := New(Config{}, errPicker{fmt.Errorf("%w: %q", kvroute.ErrModelMismatch, "alias")}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer h.Close()
	h.SetEndpoints([]kvroute.Endpoint{{ID: "127.0.0.1:1"}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"model":"alias","prompt":"x"}`)))
	require.Equal(t, http.StatusNotFound, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "no endpoint serves the request's model")
	require.Contains(t, rec.Body.String(), `"type":"NotFoundError"`)
	require.Equal(t, 1.0, counter(t, reg, "completions", ResultBadRequest))
}

// A path with a trailing slash is routed as its API and reaches the engine
// by the API's own path: vLLM (FastAPI) answers "/v1/completions/" with a
// 307 redirect built from the request's Host, the engine's own address,
// which would send the client past the gateway to the engine.
func TestGatewayForwardsATrailingSlashPathByItsAPIsPath(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	paths := make(chan string, 4)
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
		if strings.HasSuffix(r.URL.Path, "/") {
			// Starlette's redirect_slashes.
			w.Header().Set("Location", "http://"+r.Host+strings.TrimRight(r.URL.Path, "/"))
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[]}`)
	})
	h.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for path, body := range map[string]string{
		"/v1/completions/":       completionsBody("hi", false),
		"/v1/chat/completions//": `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`,
		GeneratePath + "/":       generateBody(40, "null"),
	} {
		resp := h.post(path, body)
		got := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s (Location %q)", path, got, resp.Header.Get("Location"))
		require.Equal(t, strings.TrimRight(path, "/"), recv(t, paths, "the engine's request"))
	}
}

// A model the gateway finds no endpoint for is answered as vLLM answers a
// model it does not serve: 404 NotFoundError naming "model" as the
// offending param (OpenAI's error shape; Anthropic's has no param).
func TestGatewayNamesTheModelParamOfA404(t *testing.T) {
	h, err := New(Config{}, errPicker{fmt.Errorf("%w: %q", kvroute.ErrModelMismatch, "alias")}, Options{})
	require.NoError(t, err)
	defer h.Close()
	h.SetEndpoints([]kvroute.Endpoint{{ID: "127.0.0.1:1"}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"alias","messages":[]}`)))
	requireOpenAIError(t, rec, http.StatusNotFound, "NotFoundError", "model")

	rec = httptest.NewRecorder()
	writeModelNotFound(rec, render.APIResponses, "gamma")
	requireOpenAIError(t, rec, http.StatusNotFound, "NotFoundError", "model")
	require.Contains(t, rec.Body.String(), "The model `gamma` does not exist.")

	rec = httptest.NewRecorder()
	writeModelNotFound(rec, render.APIMessages, "gamma")
	require.JSONEq(t, `{"type":"error","error":{"type":"not_found_error","message":"The model `+"`gamma`"+` does not exist."}}`, rec.Body.String())
}

// requireOpenAIError checks that rec holds vLLM's error response: status,
// and {"error":{"message","type","param","code"}} with those type, param
// (nil: null) and code.
func requireOpenAIError(t *testing.T, rec *httptest.ResponseRecorder, status int, typ string, param any) {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	var e struct {
		Error map[string]any `json:"error"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
	require.Equal(t, typ, e.Error["type"], rec.Body.String())
	require.Equal(t, float64(status), e.Error["code"], rec.Body.String())
	require.NotEmpty(t, e.Error["message"], rec.Body.String())
	p, ok := e.Error["param"]
	require.True(t, ok, "param is always present (null when none): %s", rec.Body.String())
	require.Equal(t, param, p, rec.Body.String())
}

// A browser's CORS preflight (OPTIONS with Origin and
// Access-Control-Request-Method) of an inference route, of /v1/models or
// of /v1/messages/count_tokens is answered by an engine, as vLLM answers it under its --allowed-origins,
// not refused as a method other than POST: refused, a browser client that
// can reach vLLM itself could not send its requests through the gateway.
// Another OPTIONS is still refused.
func TestGatewayPassesCORSPreflightsToAnEngine(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" {
			// Starlette's CORSMiddleware with vLLM's defaults.
			w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
			w.Header().Set("Access-Control-Allow-Methods", "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT")
			w.Header().Set("Access-Control-Allow-Headers", r.Header.Get("Access-Control-Request-Headers"))
			io.WriteString(w, "OK")
			return
		}
		w.WriteHeader(http.StatusMethodNotAllowed)
	})
	preflight := func(path string, cors bool) *http.Response {
		req, err := http.NewRequest(http.MethodOptions, h.gw.URL+path, nil)
		require.NoError(t, err)
		if cors {
			req.Header.Set("Origin", "https://app.example")
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
		}
		resp, err := h.client.Do(req)
		require.NoError(t, err)
		return resp
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/v1/models", GeneratePath, countTokensPath} {
		resp := preflight(path, true)
		got := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, got)
		require.Equal(t, "https://app.example", resp.Header.Get("Access-Control-Allow-Origin"), path)
		require.Equal(t, "authorization,content-type", resp.Header.Get("Access-Control-Allow-Headers"), path)
	}
	require.Zero(t, counter(t, h.reg, "chat_completions", ResultBadRequest), "a preflight is no bad request")
	require.Zero(t, counter(t, h.reg, "messages", ResultBadRequest), "a preflight is no bad request")
	require.Zero(t, counter(t, h.reg, "count_tokens", ResultBadRequest), "a preflight is no bad request")

	resp := preflight("/v1/chat/completions", false)
	readAll(t, resp)
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, 1.0, counter(t, h.reg, "chat_completions", ResultBadRequest))
	resp = preflight("/v1/embeddings", true)
	readAll(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a route the gateway does not serve")
}

// The request headers llm-d's routing sidecar acts on (the prefill
// endpoint, the encoder list, the KV-cache source to pull from, the
// data-parallel rank to forward to), under their pre-convention names and
// llm-d's current x-llm-d- ones, are the router's to set, or nobody's:
// a client's own values reach no engine, on an inference route or on the
// routes passed through, since the decode pod's sidecar would follow them
// past the pick.
func TestGatewayRemovesClientSidecarRoutingHeaders(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	client := []string{"x-prefiller-host-port", "x-encoder-hosts-ports", "x-kv-cache-source-host-port", "x-data-parallel-host-port",
		// llm-d's current names, which its sidecar reads when the names
		// above are absent.
		"x-llm-d-prefiller-host-port", "x-llm-d-encoder-hosts-ports", "x-llm-d-kv-cache-source-host-port"}
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/completions", completionsBody("hello there", false)},
		{http.MethodPost, "/v1/messages/count_tokens", `{"model":"test-model","messages":[]}`},
		{http.MethodGet, "/v1/models", ""},
	} {
		req, err := http.NewRequest(c.method, h.gw.URL+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		for _, k := range client {
			req.Header.Set(k, "203.0.113.9:1")
		}
		resp, err := h.client.Do(req)
		require.NoError(t, err)
		readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, c.path)
	}
	_, hdrs := h.ups[0].received()
	require.Len(t, hdrs, 3)
	for i, hd := range hdrs {
		for _, k := range client {
			require.Empty(t, hd.Values(k), "request %d: %s", i, k)
		}
	}
}

// wideBody encodes s as UTF-16 (unit 2) or UTF-32 (unit 4), big-endian or
// not, with a byte order mark first when bom.
func wideBody(s string, unit int, big, bom bool) string {
	var out []byte
	put := func(u uint32) {
		b := make([]byte, unit)
		for i := range unit {
			shift := 8 * i
			if big {
				shift = 8 * (unit - 1 - i)
			}
			b[i] = byte(u >> shift)
		}
		out = append(out, b...)
	}
	if bom {
		put(0xFEFF)
	}
	for _, r := range s {
		if unit == 2 && r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			put(uint32(hi))
			put(uint32(lo))
			continue
		}
		put(uint32(r))
	}
	return string(out)
}

// A UTF-16 or UTF-32 body, with or without a byte order mark, is served as
// vLLM serves it: FastAPI hands the body's bytes to Python's json.loads,
// which detects either encoding (json.detect_encoding) and decodes it. The
// gateway answered it 400 ("not a JSON object"); it is routed and
// forwarded as the UTF-8 JSON the engine reads the same, its Content-Length
// to match. A body that is not text in its encoding (an unpaired
// surrogate) is answered 400 naming the encoding and counted.
func TestGatewayServesAUTF16Or32BodyAsVLLMDoes(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	body := completionsBody("a wide prompt: héllo 😀 世界", false)
	n := 0
	for _, c := range []struct {
		unit     int
		big, bom bool
	}{{2, false, false}, {2, true, false}, {2, false, true}, {2, true, true}, {4, false, false}, {4, true, false}, {4, false, true}, {4, true, true}} {
		resp := h.post("/v1/completions", wideBody(body, c.unit, c.big, c.bom))
		got := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%+v: %s", c, got)
		n++
		bodies, headers := h.ups[0].received()
		require.Len(t, bodies, n)
		require.Equal(t, body, string(bodies[n-1]), "%+v", c)
		require.Equal(t, strconv.Itoa(len(body)), headers[n-1].Get("Content-Length"))
	}
	require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultSuccess) == float64(n) }, wait, time.Millisecond)
	require.Equal(t, n, h.ups[0].rendered, "rendered from the UTF-8 body")

	lone := wideBody(`{"model":"test-model","prompt":"`, 2, false, false) + "\x00\xd8" + wideBody(`"}`, 2, false, false)
	resp := h.post("/v1/completions", lone)
	got := readAll(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, got)
	require.Contains(t, got, "UTF-16LE")
	require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultBadRequest) == 1 }, wait, time.Millisecond)

	// Anthropic's token count, read as an inference body is.
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":3}`)
	})
	ct := `{"model":"test-model","messages":[{"role":"user","content":"wide 😀"}]}`
	resp = h.post("/v1/messages/count_tokens", wideBody(ct, 2, true, true))
	got = readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, got)
	bodies, _ := h.ups[0].received()
	require.Equal(t, ct, string(bodies[len(bodies)-1]))
}

// A body that starts with a UTF-8 byte order mark is served as vLLM serves
// it (FastAPI hands the body's bytes to Python's json.loads, which reads
// them as UTF-8-sig): routed and forwarded without the mark, its
// Content-Length to match, not answered 400. Two marks are no JSON for
// vLLM either.
func TestGatewayServesABodyWithAUTF8BOMAsVLLMDoes(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	body := completionsBody("a prompt behind a byte order mark", false)
	resp := h.post("/v1/completions", "\xef\xbb\xbf"+body)
	got := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, got)
	bodies, headers := h.ups[0].received()
	require.Len(t, bodies, 1)
	require.Equal(t, body, string(bodies[0]))
	require.Equal(t, strconv.Itoa(len(body)), headers[0].Get("Content-Length"))
	require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultSuccess) == 1 }, wait, time.Millisecond,
		"counted as the handler returns")
	require.Equal(t, 1, h.ups[0].rendered, "rendered from the body without the mark")

	resp = h.post("/v1/completions", "\xef\xbb\xbf\xef\xbb\xbf"+body)
	got = readAll(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, got)
}
