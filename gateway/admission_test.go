package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

// admFleet is a gateway with an admission stage in front of one simulated
// engine that kvroute's own accounting saturates at one open request, so a
// long streaming "holder" request makes every other request queue.
type admFleet struct {
	engine *server.Server
	hs     *http.Server // the engine's, recording arrivals
	served chan error

	mu       sync.Mutex
	arrivals []string // X-Test-Tag of each request the engine received, in order
	holders  []func() // releases of the holders, for close after a failure
	cut      []string // holders whose stream ended before their release, and why
	ep       kvroute.Endpoint
	gw       *Server
	client   *http.Client
}

func startAdmFleet(t *testing.T, cfg admission.Config) *admFleet {
	t.Helper()
	return startAdmFleetWith(t, cfg, simengine.Config{}, nil)
}

// startAdmFleetWith is startAdmFleet with the engine's MaxNumSeqs (when
// set), the admission's own thresholds (when set; else one open request) and
// an engine-metrics scraper (when em is set).
func startAdmFleetWith(t *testing.T, cfg admission.Config, eng simengine.Config, em *enginemetrics.Config) *admFleet {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv, err := server.New(server.Config{Model: testModel,
		Engine: simengine.Config{BlockSize: 64, NumGPUBlocks: 512, PrefillTokensPerSecond: 1e7, DecodeStep: 5 * time.Millisecond,
			MaxNumSeqs: eng.MaxNumSeqs}},
		server.Options{})
	require.NoError(t, err)
	f := &admFleet{engine: srv, served: make(chan error, 1), ep: kvroute.Endpoint{ID: ln.Addr().String()},
		client: &http.Client{Transport: &http.Transport{}}}
	f.hs = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tag := r.Header.Get("X-Test-Tag"); tag != "" {
			f.mu.Lock()
			f.arrivals = append(f.arrivals, tag)
			f.mu.Unlock()
		}
		srv.Handler().ServeHTTP(w, r)
	})}
	go func() { f.served <- f.hs.Serve(ln) }()
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	if cfg.Saturation == (admission.Saturation{}) {
		cfg.Saturation = admission.Saturation{MaxPrefillBacklog: -1, MaxOpenRequests: 1}
	}
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: rc, Endpoints: []kvroute.Endpoint{f.ep},
		Admission: &cfg, EngineMetrics: em}, Options{})
	require.NoError(t, err)
	return f
}

func (f *admFleet) close(t *testing.T) {
	for _, release := range f.holders {
		release() // a failed test may have left one streaming
	}
	f.client.CloseIdleConnections()
	require.NoError(t, f.gw.Shutdown(context.Background()))
	require.NoError(t, f.hs.Close())
	require.NoError(t, f.engine.Close())
	<-f.served
}

// arrived returns the tags of the requests the engine received, in order.
func (f *admFleet) arrived() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.arrivals)
}

// open returns the endpoint's open requests in the router's accounting.
func (f *admFleet) open() int64 {
	_, n, _ := f.gw.router.Load().Load(f.ep.ID)
	return n
}

// hold starts a long streaming request and waits until it occupies the
// endpoint; cancel releases it.
func (f *admFleet) hold(t *testing.T) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n0 := f.open()
	body, _ := json.Marshal(map[string]any{"model": testModel, "prompt": "hold", "max_tokens": 20000, "stream": true})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.gw.URL()+"/v1/completions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := f.client.Do(req)
		if err == nil {
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				t.Errorf("holder: %d %s", resp.StatusCode, b)
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if ctx.Err() == nil { // its engine slot was freed before the test meant to
			f.mu.Lock()
			f.cut = append(f.cut, fmt.Sprintf("holder %d ended before its release: %v", n0, err))
			f.mu.Unlock()
		}
	}()
	release = func() { cancel(); <-done }
	f.holders = append(f.holders, release)
	require.Eventually(t, func() bool { return f.open() == n0+1 }, wait, time.Millisecond)
	return release
}

// reply is one client's answer.
type reply struct {
	tag    string
	status int
	header http.Header
	body   string
}

// send posts a short completion with headers in a goroutine; the reply goes
// to out.
func (f *admFleet) send(ctx context.Context, tag string, headers map[string]string, out chan<- reply) {
	body := completionsBody("request "+tag, false)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.gw.URL()+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test-Tag", tag)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	go func() {
		resp, err := f.client.Do(req)
		if err != nil {
			out <- reply{tag: tag, status: -1, body: err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out <- reply{tag: tag, status: resp.StatusCode, header: resp.Header, body: string(b)}
	}()
}

// queue sends a request and waits until it is queued.
func (f *admFleet) queue(t *testing.T, tag string, headers map[string]string, out chan<- reply) {
	t.Helper()
	n := f.gw.Admission().Queued()
	f.send(context.Background(), tag, headers, out)
	require.Eventually(t, func() bool { return f.gw.Admission().Queued() == n+1 }, wait, time.Millisecond)
}

func objective(name string) map[string]string { return map[string]string{HeaderObjective: name} }

func TestGatewayAdmissionServesHigherPriorityFirstUnderSaturation(t *testing.T) {
	defer leakcheck.Check(t)()
	// A released request's claim lasts until its pick is accounted (Settle
	// only bounds it): with the default 250 ms, a loaded machine let the
	// claim lapse before premium's pick and released standard1 beside it.
	f := startAdmFleet(t, admission.Config{Settle: time.Hour,
		Objectives: []admission.Objective{{Name: "premium", Priority: 5}, {Name: "standard", Priority: 1}}})
	defer f.close(t)
	release := f.hold(t)
	out := make(chan reply, 3)
	f.queue(t, "standard1", objective("standard"), out)
	f.queue(t, "standard2", objective("standard"), out)
	f.queue(t, "premium", map[string]string{HeaderObjectiveLLMD: "premium"}, out) // llm-d's alias
	release()
	for range 3 {
		r := recv(t, out, "a reply")
		require.Equal(t, http.StatusOK, r.status, r.body)
	}
	require.Equal(t, []string{"premium", "standard1", "standard2"}, f.arrived(), "the engine's arrival order")
}

func TestGatewayAdmissionSharesABandFairlyBetweenTwoFlows(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAdmFleet(t, admission.Config{Settle: time.Hour}) // as above: claims end when picks are accounted
	defer f.close(t)
	release := f.hold(t)
	const each = 20
	out := make(chan reply, 2*each)
	// Tenant A sends three times as fast as B: all of A's requests are
	// queued before B's, the worst case for first come first served.
	for range each {
		f.queue(t, "A", map[string]string{HeaderFairnessID: "tenant-a"}, out)
	}
	for range each {
		f.queue(t, "B", map[string]string{HeaderFairnessID: "tenant-b"}, out)
	}
	release()
	for range 2 * each {
		r := recv(t, out, "a reply")
		require.Equal(t, http.StatusOK, r.status, r.body)
	}
	// Of the first 20 the engine received, each tenant had 10, within 10 %
	// of the 20.
	share := map[string]int{}
	for _, tag := range f.arrived()[:each] {
		share[tag]++
	}
	require.InDelta(t, each/2, share["A"], each/10, "shares %v", share)
}

func TestGatewayAdmissionStatusCodes(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAdmFleet(t, admission.Config{RetryAfter: 3 * time.Second,
		Objectives: []admission.Objective{{Name: "batch", Priority: -1}, {Name: "chat", Priority: 1}}})
	defer f.close(t)
	release := f.hold(t)
	out := make(chan reply, 4)

	// Sheddable traffic is shed at once: 429, Retry-After, the reason.
	f.send(context.Background(), "batch", objective("batch"), out)
	r := recv(t, out, "a reply")
	require.Equal(t, http.StatusTooManyRequests, r.status, r.body)
	require.Equal(t, "3", r.header.Get("Retry-After"))
	require.Equal(t, "shed", r.header.Get(HeaderAdmission))
	require.Contains(t, r.body, "RateLimitError")

	// A request whose queue timeout passes: 503 naming expiry.
	f.send(context.Background(), "late", map[string]string{HeaderObjective: "chat", HeaderQueueTimeout: "50ms"}, out)
	r = recv(t, out, "a reply")
	require.Equal(t, http.StatusServiceUnavailable, r.status, r.body)
	require.Equal(t, "expired", r.header.Get(HeaderAdmission))

	// A malformed queue timeout: 400 naming the header.
	for _, v := range []string{"soon", "-1s", "0s", "2h"} {
		f.send(context.Background(), "bad", map[string]string{HeaderQueueTimeout: v}, out)
		r = recv(t, out, "a reply")
		require.Equal(t, http.StatusBadRequest, r.status, v)
		require.Contains(t, r.body, HeaderQueueTimeout, v)
	}
	// Interactive traffic waits while sheddable traffic is shed, and is
	// served once the endpoint is free.
	f.queue(t, "chat", objective("chat"), out)
	f.send(context.Background(), "batch2", objective("batch"), out)
	r = recv(t, out, "a reply")
	require.Equal(t, "batch2", r.tag)
	require.Equal(t, http.StatusTooManyRequests, r.status, r.body)
	release()
	r = recv(t, out, "a reply")
	require.Equal(t, "chat", r.tag)
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, 2.0, seriesOf(t, f.gw, "kvroute_admission_requests_total", "priority", "-1", "outcome", "shed"))
	require.Equal(t, 1.0, seriesOf(t, f.gw, "kvroute_admission_requests_total", "priority", "1", "outcome", "dispatched"))
	require.Equal(t, 1.0, seriesOf(t, f.gw, "kvroute_admission_requests_total", "priority", "1", "outcome", "expired"))
	require.Equal(t, 2.0, seriesOf(t, f.gw, "kvroute_gateway_requests_total", "api", "completions", "result", "shed"))
}

// A client that goes away while queued is removed from the queue at once and
// counted; nothing of it stays behind: no goroutine, no load.
func TestGatewayAdmissionForgetsAClientThatLeavesWhileQueued(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAdmFleet(t, admission.Config{})
	defer f.close(t)
	release := f.hold(t)
	out := make(chan reply, 2)
	ctx, cancel := context.WithCancel(context.Background())
	f.send(ctx, "gone", nil, out)
	require.Eventually(t, func() bool { return f.gw.Admission().Queued() == 1 }, wait, time.Millisecond)
	cancel()
	require.Equal(t, -1, recv(t, out, "a reply").status)
	require.Eventually(t, func() bool {
		return f.gw.Admission().Queued() == 0 &&
			seriesOf(t, f.gw, "kvroute_admission_requests_total", "priority", "0", "outcome", "cancelled") == 1
	}, wait, time.Millisecond)
	release()
	require.Eventually(t, func() bool { return f.open() == 0 }, wait, time.Millisecond)
	tokens, _, _ := f.gw.router.Load().Load(f.ep.ID)
	require.Zero(t, tokens)
	// The endpoint is free again: the next request passes at once.
	f.send(context.Background(), "next", nil, out)
	r := recv(t, out, "a reply")
	require.Equal(t, http.StatusOK, r.status, r.body)
}

// Shutdown answers the requests still queued at once (503, closed) instead
// of holding the shutdown for their queue timeouts.
func TestGatewayShutdownAnswersQueuedRequests(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAdmFleet(t, admission.Config{QueueTimeout: time.Hour})
	release := f.hold(t)
	out := make(chan reply, 1)
	f.queue(t, "queued", nil, out)
	shut := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { shut <- f.gw.Shutdown(ctx) }()
	r := recv(t, out, "the queued request's reply")
	require.Equal(t, http.StatusServiceUnavailable, r.status, r.body)
	require.Equal(t, "closed", r.header.Get(HeaderAdmission))
	cancel() // cut the holder's stream
	<-shut
	release()
	f.client.CloseIdleConnections()
	require.NoError(t, f.hs.Close())
	require.NoError(t, f.engine.Close())
	<-f.served
}

// The engines' own signal saturates an endpoint kvroute's accounting sees as
// idle: with one sequence running and one waiting in the engine
// (max-num-seqs 1), sheddable traffic is shed; once the engine's queue
// drains, it passes again.
func TestGatewayAdmissionShedsOnTheEnginesOwnSaturation(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAdmFleetWith(t, admission.Config{
		Objectives: []admission.Objective{{Name: "batch", Priority: -1}},
		Saturation: admission.Saturation{MaxPrefillBacklog: -1, MaxOpenRequests: 100},
	}, simengine.Config{MaxNumSeqs: 1},
		&enginemetrics.Config{Interval: 10 * time.Millisecond, Staleness: 10 * time.Second, Timeout: time.Minute, WaitingThreshold: 1, KVCacheThreshold: -1})
	defer f.close(t)
	saturated := func() bool { s, known := f.gw.scraper.Saturation(f.ep); return s && known }
	running, waiting := f.hold(t), f.hold(t)
	require.Eventually(t, saturated, wait, time.Millisecond, "the engine's waiting request is scraped")
	out := make(chan reply, 1)
	f.send(context.Background(), "batch", objective("batch"), out)
	r := recv(t, out, "a reply")
	require.Equal(t, http.StatusTooManyRequests, r.status, r.body)
	require.Equal(t, "shed", r.header.Get(HeaderAdmission))
	waiting()
	running()
	require.Eventually(t, func() bool { s, known := f.gw.scraper.Saturation(f.ep); return !s && known }, wait, time.Millisecond)
	f.send(context.Background(), "batch", objective("batch"), out)
	r = recv(t, out, "a reply")
	require.Equal(t, http.StatusOK, r.status, r.body)
}

// TestGatewayDispatchGateHoldsSheddableOutOfTheEnginesQueue checks the
// admission's dispatch gate over real HTTP: with a request waiting in the
// engine (scraped as vllm:num_requests_waiting), a batch request picked
// onto it waits at the gateway instead of in the engine's queue, an
// interactive request goes straight to the engine ahead of it, a batch
// request beyond the gate's bound is shed with 429, and the held one is
// sent once the engine's queue is empty.
func TestGatewayDispatchGateHoldsSheddableOutOfTheEnginesQueue(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startAdmFleetWith(t, admission.Config{
		Objectives: []admission.Objective{{Name: "chat", Priority: 1}, {Name: "batch", Priority: -1}},
		Saturation: admission.Saturation{MaxPrefillBacklog: -1, MaxOpenRequests: 100},
		Headroom:   admission.Headroom{MaxHeld: 1},
	}, simengine.Config{MaxNumSeqs: 1},
		// The fleet-wide saturation never fires: only the gate holds.
		&enginemetrics.Config{Interval: 10 * time.Millisecond, Staleness: 10 * time.Second, Timeout: time.Minute, WaitingThreshold: 100, KVCacheThreshold: -1})
	defer f.close(t)
	defer func() {
		// A one-off failure here ("timed out waiting for the shed reply")
		// was seen once under load and not reproduced: say what the gate
		// saw, so that the next one can be told apart (a failed or stale
		// scrape hands the gate to kvroute's own accounting, which lets the
		// held request go).
		if t.Failed() {
			sig, fresh := f.gw.scraper.Signal(f.ep)
			failure, completed := f.gw.scraper.LastScrape(f.ep)
			f.mu.Lock()
			cut := slices.Clone(f.cut)
			f.mu.Unlock()
			t.Logf("gate: held %d; signal %+v fresh %v; last scrape completed %v, failure %q; arrived %v; holders cut %q",
				f.gw.Admission().Held(), sig, fresh, completed, failure, f.arrived(), cut)
		}
	}()
	waiting := func(n int) func() bool {
		return func() bool { sig, fresh := f.gw.scraper.Signal(f.ep); return fresh && sig.Waiting == n }
	}
	running, queued := f.hold(t), f.hold(t)
	require.Eventually(t, waiting(1), wait, time.Millisecond, "the engine's waiting request is scraped")
	held := make(chan reply, 1)
	f.send(context.Background(), "batch", objective("batch"), held)
	require.Eventually(t, func() bool { return f.gw.Admission().Held() == 1 }, wait, time.Millisecond)

	out := make(chan reply, 2)
	f.send(context.Background(), "shed", objective("batch"), out)
	r := recv(t, out, "the shed reply")
	require.Equal(t, http.StatusTooManyRequests, r.status, r.body)
	require.Equal(t, "shed", r.header.Get(HeaderAdmission))
	require.NotEmpty(t, r.header.Get("Retry-After"))

	f.send(context.Background(), "chat", objective("chat"), out)
	require.Eventually(t, func() bool { return slices.Contains(f.arrived(), "chat") }, wait, time.Millisecond,
		"the interactive request is not held")
	require.NotContains(t, f.arrived(), "batch")
	queued()
	running()
	r = recv(t, out, "the interactive reply")
	require.Equal(t, http.StatusOK, r.status, r.body)
	r = recv(t, held, "the held batch reply")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Equal(t, []string{"chat", "batch"}, f.arrived())
	require.Zero(t, f.gw.Admission().Held())
}

// A Handler made with New in front of a Router that has an admission stage
// of its own (kvroute.Options.Admission) answers the admission's refusals
// as a Server's Handler does, 503 or 429 with HeaderAdmission and a
// Retry-After (the admission's default), instead of panicking on the
// admission it was not given.
func TestHandlerAnswersARoutersAdmissionRefusal(t *testing.T) {
	defer leakcheck.Check(t)()
	adm, err := admission.New(admission.Config{}, admission.Options{})
	require.NoError(t, err)
	adm.Close() // every request is refused with ErrClosed
	rc := kvroute.DefaultConfig()
	rc.Model = testModel
	rc.Events.Enabled = new(false)
	rc.DisableRender = true
	r, err := kvroute.New(t.Context(), rc, kvroute.Options{Admission: adm})
	require.NoError(t, err)
	defer r.Close()
	eps := []kvroute.Endpoint{{ID: "127.0.0.1:1"}}
	require.NoError(t, r.SetEndpoints(eps))
	h, err := New(Config{Model: testModel}, r, Options{})
	require.NoError(t, err)
	defer h.Close()
	h.SetEndpoints(eps)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(completionsBody("hi", false))))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	require.Equal(t, admission.Reason(admission.ErrClosed), rec.Header().Get(HeaderAdmission))
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
}
