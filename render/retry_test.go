package render

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/telemetry"
)

// Every failure the reference retries, retried exactly once on the other
// endpoint.
func TestRenderRetriesOnceOnDifferentEndpoint(t *testing.T) {
	cases := map[string]http.HandlerFunc{
		"408": status(408), "429": status(429), "500": status(500), "502": status(502), "503": status(503), "504": status(504),
		"501": status(501),
		"body cut off after 200 header": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(200)
			fmt.Fprint(w, `{"token_ids":[1,`)
		},
		"connection closed before answer": func(w http.ResponseWriter, r *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		},
	}
	for name, failing := range cases {
		t.Run(name, func(t *testing.T) {
			bad, good := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
			bad.on("/v1/completions/render", failing)
			c := newTestClient(t, nil, bad, good)
			res, err := c.Render(context.Background(), completions("hello"))
			require.NoError(t, err)
			require.Equal(t, "b", res.Endpoint)
			require.Equal(t, 1, bad.hits(""))
			require.Equal(t, 1, good.hits(""))
		})
	}
}

func TestRenderRetriesConnectionRefused(t *testing.T) {
	dead := "http://" + testport.Addr(t) // nothing listens, nor takes the port meanwhile
	good := newFakeVLLM(t, "b")
	c := newTestClient(t, nil)
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: dead}, {ID: "b", URL: good.URL}}))
	res, err := c.Render(context.Background(), completions("x"))
	require.NoError(t, err)
	require.Equal(t, "b", res.Endpoint)

	// Both dead: a connection error after two attempts.
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: dead}, {ID: "c", URL: dead + "/other"}}))
	_, err = c.Render(context.Background(), completions("x"))
	e := asError(t, err)
	require.Equal(t, ReasonConnection, e.Reason)
	require.Equal(t, 2, e.Attempts)
}

func TestRenderDoesNotRetryClientErrors(t *testing.T) {
	cases := map[string]struct {
		h       http.HandlerFunc
		status  int
		reason  Reason
		target  error
		message string
	}{
		"400": {h: status(400), status: 400, reason: ReasonStatus},
		"401": {h: status(401), status: 401, reason: ReasonStatus},
		"403": {h: status(403), status: 403, reason: ReasonStatus},
		"405": {h: status(405), status: 405, reason: ReasonStatus},
		"422": {h: status(422), status: 422, reason: ReasonStatus},
		"model mismatch": {h: func(w http.ResponseWriter, r *http.Request) {
			writeError(w, 404, "NotFoundError", "The model `llama` does not exist.")
		}, status: 404, reason: ReasonStatus, target: ErrModelNotFound, message: "model mismatch (HTTP 404): The model `llama` does not exist."},
		"invalid JSON":   {h: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"token_ids":[1,2`) }, status: 200, reason: ReasonDecode},
		"negative token": {h: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `[{"token_ids":[-1]}]`) }, status: 200, reason: ReasonDecode},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bad, good := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
			bad.on("/v1/completions/render", tc.h)
			reg := prometheus.NewRegistry()
			c, err := New(DefaultConfig(), Options{Set: telemetry.Set{Registerer: reg}})
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: bad.URL}, {ID: "b", URL: good.URL}}))

			_, err = c.Render(context.Background(), completions("x"))
			e := asError(t, err)
			require.Equal(t, tc.reason, e.Reason)
			require.Equal(t, tc.status, e.Status)
			require.Equal(t, "a", e.Endpoint)
			require.Equal(t, 1, e.Attempts)
			if tc.target != nil {
				require.ErrorIs(t, err, tc.target)
			}
			if tc.message != "" {
				require.Contains(t, err.Error(), tc.message)
			}
			require.Equal(t, 0, good.hits(""), "not retried")
			require.Equal(t, 1.0, failures(t, reg, string(tc.reason)))
		})
	}
}

func TestRenderErrorBodyTruncatedTo1KiB(t *testing.T) {
	s := newFakeVLLM(t, "a")
	s.on("/v1/completions/render", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		fmt.Fprint(w, strings.Repeat("x", 5000))
	})
	c := newTestClient(t, nil, s)
	_, err := c.Render(context.Background(), completions("x"))
	e := asError(t, err)
	require.Len(t, e.Body, 1024)
	require.Equal(t, 400, e.Status)
}

func TestRenderNoRetryWithSingleEndpointOrFixedURL(t *testing.T) {
	s := newFakeVLLM(t, "a")
	s.on("/v1/completions/render", status(503))
	c := newTestClient(t, nil, s)
	_, err := c.Render(context.Background(), completions("x"))
	require.Equal(t, 1, asError(t, err).Attempts)
	require.Equal(t, 1, s.hits(""))

	f := newTestClient(t, func(c *Config) { c.URL = s.URL + "/" })
	_, err = f.Render(context.Background(), completions("x"))
	e := asError(t, err)
	require.Equal(t, 1, e.Attempts)
	require.Equal(t, s.URL, e.Endpoint)
	require.Equal(t, 2, s.hits(""))
	require.ErrorIs(t, f.SetEndpoints(nil), ErrFixedURL)
	require.Equal(t, []Endpoint{{ID: s.URL, URL: s.URL}}, f.Endpoints())
}

func TestRenderRetrySkipsEndpointsWithTheSameURL(t *testing.T) {
	bad, good := newFakeVLLM(t, "bad"), newFakeVLLM(t, "good")
	bad.on("/v1/completions/render", status(500))
	c := newTestClient(t, nil)
	// Sorted: a1 (bad), a2 (bad, same URL), b (good).
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "b", URL: good.URL}, {ID: "a2", URL: bad.URL}, {ID: "a1", URL: bad.URL}}))
	res, err := c.Render(context.Background(), completions("x"))
	require.NoError(t, err)
	require.Equal(t, "b", res.Endpoint)
	require.Equal(t, 1, bad.hits(""))
}

func TestRenderNeverRetriesTwice(t *testing.T) {
	a, b, d := newFakeVLLM(t, "a"), newFakeVLLM(t, "b"), newFakeVLLM(t, "c")
	for _, s := range []*fakeVLLM{a, b, d} {
		s.on("/v1/completions/render", status(500))
	}
	c := newTestClient(t, nil, a, b, d)
	_, err := c.Render(context.Background(), completions("x"))
	e := asError(t, err)
	require.Equal(t, 2, e.Attempts)
	require.Equal(t, "b", e.Endpoint)
	require.Equal(t, 2, a.hits("")+b.hits("")+d.hits(""))
}

func TestRenderNoEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := New(DefaultConfig(), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Render(context.Background(), completions("x"))
	e := asError(t, err)
	require.Equal(t, ReasonNoEndpoints, e.Reason)
	require.ErrorIs(t, err, ErrNoEndpoints)
	require.Equal(t, 1.0, failures(t, reg, "no_endpoints"))
}

func TestRenderInvalidRequests(t *testing.T) {
	s := newFakeVLLM(t, "a")
	c := newTestClient(t, nil, s)
	for _, req := range []*Request{nil, {API: "embeddings", Body: []byte(`{}`)}, {API: APIChatCompletions, Body: []byte(`[1]`)}, {API: APICompletions}} {
		_, err := c.Render(context.Background(), req)
		e := asError(t, err)
		require.Equal(t, ReasonOther, e.Reason)
		require.ErrorIs(t, err, ErrInvalidRequest)
	}
	require.Equal(t, 0, s.hits(""))
}

func TestRenderHugeResponseIsDecodeError(t *testing.T) {
	s := newFakeVLLM(t, "a")
	big := `{"token_ids":[1],"pad":"` + strings.Repeat("x", 3<<20) + `"}`
	s.on("/v1/chat/completions/render", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, big) })
	s.on("/v1/completions/render", func(w http.ResponseWriter, r *http.Request) {
		// Streamed without Content-Length.
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "["+big+"]")
	})
	c := newTestClient(t, func(c *Config) { c.MaxResponseBytes = 1 << 20 }, s)
	_, err := c.Render(context.Background(), chat("x"))
	require.Equal(t, ReasonDecode, asError(t, err).Reason)
	_, err = c.Render(context.Background(), completions("x"))
	require.Equal(t, ReasonDecode, asError(t, err).Reason)
	require.Contains(t, err.Error(), "cap")
}

func TestRoundRobinSpreadsEvenlyInIDOrder(t *testing.T) {
	servers := []*fakeVLLM{newFakeVLLM(t, "a"), newFakeVLLM(t, "b"), newFakeVLLM(t, "c")}
	// Without hedges: a render slower than the threshold on this busy
	// machine would add a second hit.
	c := newTestClient(t, func(cfg *Config) { cfg.Hedge = new(false) })
	// Given out of order: the snapshot is sorted by ID.
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "10.0.0.3:8000", URL: servers[2].URL}, {ID: "10.0.0.1:8000", URL: servers[0].URL}, {ID: "10.0.0.2:8000", URL: servers[1].URL}}))
	for i := range 3 {
		res, err := c.Render(context.Background(), completions("x"))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("10.0.0.%d:8000", i+1), res.Endpoint)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 75 {
				_, err := c.Render(context.Background(), completions("x"))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	for _, s := range servers {
		require.Equal(t, 101, s.hits(""), s.name)
	}
}

func TestSetEndpointsLeavesOutInvalid(t *testing.T) {
	c := newTestClient(t, nil)
	err := c.SetEndpoints([]Endpoint{{ID: "b", URL: "http://10.0.0.2:8000/"}, {ID: "", URL: "http://x"}, {ID: "c", URL: "ftp://x"}, {ID: "a", URL: "http://10.0.0.1:8000"}, {ID: "a", URL: "http://10.0.0.9:8000"}})
	require.Error(t, err)
	require.Equal(t, []Endpoint{{ID: "a", URL: "http://10.0.0.9:8000"}, {ID: "b", URL: "http://10.0.0.2:8000"}}, c.Endpoints())
	require.NoError(t, c.SetEndpoints(nil))
	require.Empty(t, c.Endpoints())
}

// A hanging first endpoint uses the whole budget when no per-attempt cap is
// set: no time is left for a retry.
func TestBudgetIsSharedByBothAttempts(t *testing.T) {
	hung, good := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	hung.on("/v1/completions/render", hang)
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.Timeout = 200 * time.Millisecond
	c, err := New(cfg, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: hung.URL}, {ID: "b", URL: good.URL}}))

	start := time.Now()
	_, err = c.Render(context.Background(), completions("x"))
	elapsed := time.Since(start)
	e := asError(t, err)
	require.Equal(t, ReasonTimeout, e.Reason)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 1, e.Attempts)
	require.Equal(t, 0, good.hits(""), "no budget left for a retry")
	// The configured 200 ms, not the 5 s default, is the budget, and the
	// render ended on it, no earlier.
	require.Equal(t, 200*time.Millisecond, c.budget(routeCompletions))
	require.GreaterOrEqual(t, elapsed, 200*time.Millisecond)
	require.Equal(t, 1.0, failures(t, reg, "timeout"))
	require.Equal(t, 1, histCount(t, reg, "timeout"))
}

// With AttemptTimeout, a hung first attempt is cut short and the retry on the
// other endpoint succeeds within the budget. The cap bounds the retry too,
// so it is long enough (1 s) for a loaded machine to complete a healthy
// render in it. An uncapped hung attempt would use up the 30 s chat budget:
// no retry would succeed, and two hung endpoints would get one attempt, not
// two.
func TestAttemptTimeoutLeavesTimeForRetry(t *testing.T) {
	const attempt = time.Second
	hung, good := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	hung.on("/v1/chat/completions/render", hang)
	c := newTestClient(t, func(c *Config) { c.AttemptTimeout = new(attempt) }, hung, good)
	start := time.Now()
	res, err := c.Render(context.Background(), chat("x"))
	require.NoError(t, err)
	require.Equal(t, "b", res.Endpoint)
	require.GreaterOrEqual(t, time.Since(start), attempt)

	// Both hung: two capped attempts, then a timeout well inside the budget.
	good.on("/v1/chat/completions/render", hang)
	start = time.Now()
	_, err = c.Render(context.Background(), chat("x"))
	e := asError(t, err)
	require.Equal(t, ReasonTimeout, e.Reason)
	require.Equal(t, 2, e.Attempts)
	require.GreaterOrEqual(t, time.Since(start), 2*attempt)
}

func TestBudgetIsMaxOfTimeoutAndMMTimeoutForChat(t *testing.T) {
	c := newTestClient(t, func(c *Config) { c.Timeout = 7 * time.Second; c.MMTimeout = 3 * time.Second })
	require.Equal(t, 7*time.Second, c.budget(routeChat))
	require.Equal(t, 7*time.Second, c.budget(routeCompletions))
	d := newTestClient(t, func(c *Config) { c.Timeout = DefaultTimeout })
	require.Equal(t, 30*time.Second, d.budget(routeMessages))
	require.Equal(t, 5*time.Second, d.budget(routeCompletions))
}

func TestCallerDeadlineWinsAndStopsRetry(t *testing.T) {
	hung, good := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	hung.on("/v1/completions/render", hang)
	c := newTestClient(t, nil, hung, good) // a 1 min budget
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := renderOrHang(t, c, ctx, completions("x"))
	e := asError(t, err)
	require.Equal(t, ReasonTimeout, e.Reason)
	require.Equal(t, 1, e.Attempts)
	require.Equal(t, 0, good.hits(""))
}

func TestCallerCancellationIsNotAFailure(t *testing.T) {
	hung, good := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	entered := make(chan struct{})
	hung.on("/v1/completions/render", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
	})
	reg := prometheus.NewRegistry()
	c, err := New(DefaultConfig(), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: hung.URL}, {ID: "b", URL: good.URL}}))

	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-entered; cancel() }()
	_, err = c.Render(ctx, completions("x"))
	e := asError(t, err)
	require.Equal(t, ReasonCanceled, e.Reason)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 0, good.hits(""))
	require.Equal(t, 1, histCount(t, reg, "canceled"))
	for _, r := range failureReasons {
		require.Zero(t, failures(t, reg, string(r)), r)
	}
}

// An attempt that fails is counted in kvroute_render_attempt_failures_total
// by reason even when the retry on the other endpoint answers and the
// render succeeds (render_failures_total counts failed renders only).
func TestFailedAttemptsCountedWhenTheRetryAnswers(t *testing.T) {
	bad, good := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	bad.on("/v1/completions/render", status(503))
	reg := prometheus.NewRegistry()
	c, err := New(testConfig(), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: bad.URL}, {ID: "b", URL: good.URL}}))
	res, err := c.Render(context.Background(), completions("hello"))
	require.NoError(t, err)
	require.Equal(t, "b", res.Endpoint)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kvroute_render_attempt_failures_total Failed render attempts by reason (timeout, status, connection, decode, other), those a retry or a hedge made up for included; hedge losers abandoned and caller cancellations are not counted.
# TYPE kvroute_render_attempt_failures_total counter
kvroute_render_attempt_failures_total{reason="connection"} 0
kvroute_render_attempt_failures_total{reason="decode"} 0
kvroute_render_attempt_failures_total{reason="other"} 0
kvroute_render_attempt_failures_total{reason="status"} 1
kvroute_render_attempt_failures_total{reason="timeout"} 0
`), "kvroute_render_attempt_failures_total"))
	require.Zero(t, testutil.ToFloat64(c.metrics.failures[ReasonStatus]), "the render succeeded")
}

// A renderer whose render routes do not exist (vLLM without
// --enable-scale-out: FastAPI's bare {"detail":"Not Found"} 404) cannot
// render any request there, so the render is retried once on another
// endpoint within the budget, as a 5xx is, and the endpoint is passed over
// for that route for notEnabledBench on the Client's clock: the requests
// after it do not pay for the 404 again. Each such answer is counted in
// kvroute_render_not_enabled_total. Its other routes are still used (a
// renderer of an older vLLM lacks only /v1/messages/render, say). When
// every endpoint is passed over, a render fails at once, without an
// attempt; once the bench ends the endpoint is tried again.
func TestRenderNotEnabledIsRetriedAndTheEndpointPassedOver(t *testing.T) {
	bad, good := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	bad.on("/v1/completions/render", func(w http.ResponseWriter, r *http.Request) { notFound(w) })
	reg := prometheus.NewRegistry()
	clk := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	c, err := New(testConfig(), Options{Set: telemetry.Set{Registerer: reg, Clock: clk}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: bad.URL}, {ID: "b", URL: good.URL}}))
	notEnabled := func() float64 {
		return testutil.ToFloat64(c.metrics.notEnabled)
	}

	res, err := c.Render(context.Background(), completions("hello"))
	require.NoError(t, err, "retried on the other endpoint")
	require.Equal(t, "b", res.Endpoint)
	require.Equal(t, 1, bad.hits("/v1/completions/render"))
	require.Equal(t, 1.0, notEnabled())
	for range 4 {
		res, err = c.Render(context.Background(), completions("hello"))
		require.NoError(t, err)
		require.Equal(t, "b", res.Endpoint)
	}
	require.Equal(t, 1, bad.hits("/v1/completions/render"), "passed over: no request paid for its 404 again")
	require.Zero(t, failures(t, reg, string(ReasonStatus)), "every render succeeded")

	for range 2 { // another route of the same renderer is still used
		_, err = c.Render(context.Background(), chat("hi"))
		require.NoError(t, err)
	}
	require.Equal(t, 1, bad.hits("/v1/chat/completions/render"))

	clk.Advance(notEnabledBench + time.Second)
	for range 2 {
		res, err = c.Render(context.Background(), completions("hello"))
		require.NoError(t, err)
		require.Equal(t, "b", res.Endpoint)
	}
	require.Equal(t, 2, bad.hits("/v1/completions/render"), "tried again once its bench ended")
	require.Equal(t, 2.0, notEnabled())

	// Neither renders: the render fails after both answered, and then at
	// once, without an attempt, while both are passed over.
	good.on("/v1/completions/render", func(w http.ResponseWriter, r *http.Request) { notFound(w) })
	clk.Advance(notEnabledBench + time.Second)
	_, err = c.Render(context.Background(), completions("hello"))
	e := asError(t, err)
	require.ErrorIs(t, err, ErrRenderNotEnabled)
	require.Equal(t, 2, e.Attempts)
	require.Equal(t, 4.0, notEnabled())
	hits := bad.hits("") + good.hits("")
	_, err = c.Render(context.Background(), completions("hello"))
	e = asError(t, err)
	require.ErrorIs(t, err, ErrRenderNotEnabled)
	require.Equal(t, ReasonStatus, e.Reason)
	require.Equal(t, 404, e.Status)
	require.Zero(t, e.Attempts)
	require.Equal(t, hits, bad.hits("")+good.hits(""), "no attempt")
	require.Equal(t, 4.0, notEnabled(), "counts the answers, not the renders failed at once")
	require.Equal(t, 2.0, failures(t, reg, string(ReasonStatus)))
}

// The mode discovery's probes expect a legacy renderer's 404 on a native
// route: a probe answered so is neither retried elsewhere nor passes the
// endpoint over, and is not counted.
func TestRenderNotEnabledProbeIsNeitherRetriedNorBenched(t *testing.T) {
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	for _, s := range []*fakeVLLM{a, b} {
		s.on(messagesPath, func(w http.ResponseWriter, r *http.Request) { notFound(w) })
	}
	c := newTestClient(t, nil, a, b)
	_, err := c.Render(context.Background(), messagesReq())
	require.NoError(t, err)
	require.Equal(t, 1, a.hits(messagesPath)+b.hits(messagesPath), "one native probe, not retried")
	m, err := c.Discover(context.Background(), APIMessages, "")
	require.NoError(t, err)
	require.Equal(t, ModeLegacy, m)
	require.Zero(t, testutil.ToFloat64(c.metrics.notEnabled))
}

// The attempt cap only leaves time for a retry on another endpoint: a
// render with a fixed URL, or to the only endpoint serving its model, is
// one attempt with the whole budget, so a renderer slower than the cap
// still answers (llm-d's token producer gives a fixed URL its whole
// budget too). With another endpoint to retry on, the cap applies.
func TestAttemptTimeoutOnlyWhenARetryCanFollow(t *testing.T) {
	const attempt = 20 * time.Millisecond
	slow := func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(3 * attempt) // a renderer slower than the cap, not a synchronisation
		vllmRender(w, r)
	}
	one := newFakeVLLM(t, "a")
	one.on("/v1/chat/completions/render", slow)

	fixed := newTestClient(t, func(c *Config) { c.URL = one.URL; c.AttemptTimeout = new(attempt) })
	res, err := fixed.Render(context.Background(), chat("x"))
	require.NoError(t, err, "a fixed URL has the whole budget")
	require.NotEmpty(t, res.Prompts)

	alone := newTestClient(t, func(c *Config) { c.AttemptTimeout = new(attempt) }, one)
	_, err = alone.Render(context.Background(), chat("x"))
	require.NoError(t, err, "the only endpoint has the whole budget")

	other := newFakeVLLM(t, "b")
	other.on("/v1/chat/completions/render", slow)
	two := newTestClient(t, func(c *Config) { c.AttemptTimeout = new(attempt); c.Hedge = new(false) }, one, other)
	_, err = two.Render(context.Background(), chat("x"))
	e := asError(t, err)
	require.Equal(t, ReasonTimeout, e.Reason, "with another endpoint each attempt is capped")
	require.Equal(t, 2, e.Attempts)
}
