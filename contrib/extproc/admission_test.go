package extproc

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// admHarness is one simulated engine behind the picker with an admission
// stage whose own accounting saturates the engine at one open request, and
// the Envoy-behaving proxy in front: a long streaming "holder" request makes
// every other request queue (or be shed).
func admHarness(t *testing.T) (h *harness, envoyURL string, client *http.Client, stop func()) {
	t.Helper()
	acfg := admission.Config{
		Objectives: []admission.Objective{{Name: "batch", Priority: -1}, {Name: "chat", Priority: 1}},
		Saturation: admission.Saturation{MaxPrefillBacklog: -1, MaxOpenRequests: 1},
		RetryAfter: 3 * time.Second,
		// No periodic re-check: a queued request leaves only when the
		// picker's Notify says the engine's load moved.
		Recheck: time.Hour,
	}
	// 10ms per decoded token: a holder of 8000 tokens streams for 80s, far
	// longer than any test waits for it.
	h = newHarnessWith(t, Config{}, &acfg, engineOpts{decodeStep: 10 * time.Millisecond})
	envoy, client, stopEnvoy := newEnvoy(h)
	return h, envoy.URL, client, func() { stopEnvoy(); h.close() }
}

// hold sends a long streaming completion through the proxy and waits until
// the engine holds it open; the returned function ends it.
func hold(t *testing.T, h *harness, client *http.Client, url string) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body := strings.Replace(completionsBody(prompt(40, 20, "hold"), true), `"max_tokens":4`, `"max_tokens":8000`, 1)
	resp := admPost(t, ctx, client, url, body, nil)
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		t.Fatalf("holder: status %d: %s", resp.StatusCode, readAll(t, resp.Body))
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err, line)
	require.Eventually(t, func() bool { _, n := h.load(h.engines[0].id); return n == 1 }, wait, 5*time.Millisecond)
	return func() { cancel(); resp.Body.Close() }
}

// admPost sends one completions request through the proxy with headers.
func admPost(t *testing.T, ctx context.Context, client *http.Client, url, body string, headers map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	return resp
}

// A sheddable request is answered 429 with Retry-After and the reason when
// the engine is saturated, and counted as shed.
func TestAdmissionShedsSheddableWhenSaturated(t *testing.T) {
	defer leakcheck.Check(t)()
	h, url, client, stop := admHarness(t)
	defer stop()
	release := hold(t, h, client, url)
	defer release()

	resp := admPost(t, ctxT(t), client, url, completionsBody(prompt(41, 20, "batch"), false),
		map[string]string{HeaderObjective: "batch"})
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, body)
	require.Equal(t, "shed", resp.Header.Get(HeaderAdmission))
	require.Equal(t, "rejected-saturated", resp.Header.Get(HeaderDroppedReason))
	require.Equal(t, "3", resp.Header.Get("Retry-After"))
	require.Contains(t, body, "RateLimitError")
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "shed"}))

	// llm-d's alias names the objective as well.
	resp = admPost(t, ctxT(t), client, url, completionsBody(prompt(41, 20, "batch2"), false),
		map[string]string{HeaderObjectiveLLMD: "batch"})
	readAll(t, resp.Body)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	release()
	h.idle()
}

// A request that queues behind a saturated engine is dispatched, and
// answered 200, once the load on the engine is released.
func TestAdmissionQueuedRequestDispatchedOnRelease(t *testing.T) {
	defer leakcheck.Check(t)()
	h, url, client, stop := admHarness(t)
	defer stop()
	release := hold(t, h, client, url)
	defer release()

	type answer struct {
		code int
		body string
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := client.Do(mustRequest(t, url, completionsBody(prompt(42, 20, "chat"), false),
			map[string]string{HeaderObjective: "chat", HeaderFairnessID: "tenant-a"}))
		if err != nil {
			got <- answer{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		got <- answer{resp.StatusCode, b.String()}
	}()
	require.Eventually(t, func() bool { return h.adm.Queued() == 1 }, wait, 5*time.Millisecond)
	select {
	case a := <-got:
		t.Fatalf("answered while the engine was saturated: %d %s", a.code, a.body)
	default:
	}
	release()
	a := <-got
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.Contains(t, a.body, `"choices"`)
	h.idle()
	require.Equal(t, 0, h.adm.Queued())
}

// A queued request whose x-kvroute-queue-timeout passes is answered 503
// with the reason expired.
func TestAdmissionQueueTimeoutAnswers503(t *testing.T) {
	defer leakcheck.Check(t)()
	h, url, client, stop := admHarness(t)
	defer stop()
	release := hold(t, h, client, url)
	defer release()

	resp := admPost(t, ctxT(t), client, url, completionsBody(prompt(43, 20, "late"), false),
		map[string]string{HeaderQueueTimeout: "50ms"})
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.Equal(t, "expired", resp.Header.Get(HeaderAdmission))
	require.Equal(t, "rejected-ttl-expired", resp.Header.Get(HeaderDroppedReason))
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Equal(t, 0, h.adm.Queued())
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "no_endpoint"}))
	release()
	h.idle()
}

// A malformed queue timeout is answered 400 naming the header, before any
// pick.
func TestAdmissionMalformedHeaderAnswers400(t *testing.T) {
	defer leakcheck.Check(t)()
	h, url, client, stop := admHarness(t)
	defer stop()
	for _, v := range []string{"soon", "-1s", "0s", "2h"} {
		resp := admPost(t, ctxT(t), client, url, completionsBody(prompt(44, 20, v), false),
			map[string]string{HeaderQueueTimeout: v})
		body := readAll(t, resp.Body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		require.Contains(t, body, http.CanonicalHeaderKey(HeaderQueueTimeout), v) // named as package admission names it
	}
	require.Equal(t, 4.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "bad_request"}))
	h.idle()
}

// The Envoy stream of a queued request goes away (the client disconnects):
// the request leaves the queue at once, is counted, and leaves no load and
// no goroutine behind.
func TestAdmissionStreamGoneWhileQueued(t *testing.T) {
	defer leakcheck.Check(t)()
	h, url, client, stop := admHarness(t)
	defer stop()
	release := hold(t, h, client, url)
	defer release()

	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := mustRequest(t, url, completionsBody(prompt(45, 20, "gone"), false), nil).WithContext(ctx)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool { return h.adm.Queued() == 1 }, wait, 5*time.Millisecond)
	cancel()
	<-done
	require.Eventually(t, func() bool { return h.adm.Queued() == 0 }, wait, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		return h.counter("kvroute_extproc_requests_total", map[string]string{"result": "client_abort"}) == 1
	}, wait, 5*time.Millisecond)
	_, n := h.load(h.engines[0].id)
	require.EqualValues(t, 1, n, "only the holder is in flight")
	release()
	h.idle()
}

// Without an admission stage the admission headers are not read: a
// malformed queue timeout is routed as any request.
func TestAdmissionHeadersIgnoredWithoutAdmission(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	envoy, client, stopEnvoy := newEnvoy(h)
	defer stopEnvoy()
	resp := admPost(t, ctxT(t), client, envoy.URL, completionsBody(prompt(46, 20, "x"), false),
		map[string]string{HeaderQueueTimeout: "soon", HeaderObjective: "batch"})
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	h.idle()
}

func mustRequest(t *testing.T, url, body string, headers map[string]string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return req
}

// Closing the admission stage (the picker shutting down) answers the
// requests still queued at once: 503 with the reason closed.
func TestAdmissionCloseAnswersQueued503(t *testing.T) {
	defer leakcheck.Check(t)()
	h, url, client, stop := admHarness(t)
	defer stop()
	release := hold(t, h, client, url)
	defer release()

	got := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Do(mustRequest(t, url, completionsBody(prompt(47, 20, "closing"), false), nil))
		if err != nil {
			got <- nil
			return
		}
		got <- resp
	}()
	require.Eventually(t, func() bool { return h.adm.Queued() == 1 }, wait, 5*time.Millisecond)
	h.adm.Close()
	resp := <-got
	require.NotNil(t, resp)
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.Equal(t, "closed", resp.Header.Get(HeaderAdmission))
	require.Equal(t, "rejected-shutting-down", resp.Header.Get(HeaderDroppedReason))
	release()
	h.idle()
}

// gateSignals reports every engine with a full waiting queue, or empty.
type gateSignals struct{ waiting atomic.Int64 }

func (g *gateSignals) Signal(kvroute.Endpoint) (enginemetrics.Signal, bool) {
	return enginemetrics.Signal{Waiting: int(g.waiting.Load()), Scraped: time.Unix(g.waiting.Load(), 0)}, true
}

// The admission's dispatch gate in the picker: with the picked engine's
// queue full, a sheddable request waits before the routing answer goes
// back to Envoy, one more is answered 429 (the gate holds one per
// endpoint), and the held one is routed, and served, once the engine's
// queue is empty; an interactive request is never held.
func TestAdmissionDispatchGateHoldsSheddable(t *testing.T) {
	defer leakcheck.Check(t)()
	sig := &gateSignals{}
	sig.waiting.Store(5)
	acfg := admission.Config{
		Objectives: []admission.Objective{{Name: "batch", Priority: -1}, {Name: "chat", Priority: 1}},
		Headroom:   admission.Headroom{MaxHeld: 1},
		Recheck:    10 * time.Millisecond,
	}
	h := newHarnessSignals(t, Config{}, &acfg, nil, sig, engineOpts{})
	envoy, client, stopEnvoy := newEnvoy(h)
	defer func() { stopEnvoy(); h.close() }()

	held := make(chan *http.Response, 1)
	go func() {
		held <- admPost(t, context.Background(), client, envoy.URL, completionsBody(prompt(41, 20, "held"), false),
			map[string]string{HeaderObjective: "batch"})
	}()
	require.Eventually(t, func() bool { return h.adm.Held() == 1 }, wait, time.Millisecond)

	resp := admPost(t, ctxT(t), client, envoy.URL, completionsBody(prompt(42, 20, "shed"), false),
		map[string]string{HeaderObjective: "batch"})
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, body)
	require.Equal(t, "shed", resp.Header.Get(HeaderAdmission))

	resp = admPost(t, ctxT(t), client, envoy.URL, completionsBody(prompt(43, 20, "chat"), false),
		map[string]string{HeaderObjective: "chat"})
	body = readAll(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, 1, h.adm.Held())

	sig.waiting.Store(0) // a new scrape: the engine's queue is empty
	var r *http.Response
	select {
	case r = <-held:
	case <-time.After(wait):
		t.Fatal("the held request was not routed")
	}
	body = readAll(t, r.Body)
	require.Equal(t, http.StatusOK, r.StatusCode, body)
	h.idle()
}

// The refusal's Retry-After is the hint in whole seconds, rounded up and at
// least 1; a hint within a second of the largest duration saturates instead
// of wrapping to a negative count (read as 1).
func TestAdmissionRetryAfterSaturates(t *testing.T) {
	const longest = time.Duration(1<<63 - 1)
	for hint, want := range map[time.Duration]string{longest: "9223372037", longest - time.Second + 2: "9223372036", 2500 * time.Millisecond: "3", 0: "1"} {
		var got string
		for _, h := range admissionHeaders(admission.ErrShed, hint) {
			if h.GetHeader().GetKey() == "retry-after" {
				got = string(h.GetHeader().GetRawValue())
			}
		}
		require.Equal(t, want, got, "hint %v", hint)
	}
}
