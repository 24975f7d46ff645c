package render

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/h1pool"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// pressureClient builds a Client on a manual clock and a fresh registry
// over the given servers (IDs "a", "b", ... in order).
func pressureClient(t *testing.T, mutate func(*Config), servers ...*fakeVLLM) (*Client, *telemetry.Manual, *prometheus.Registry) {
	t.Helper()
	cfg := testConfig()
	mutate(&cfg)
	clk := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	reg := prometheus.NewRegistry()
	c, err := New(cfg, Options{Set: telemetry.Set{Registerer: reg, Clock: clk}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	var eps []Endpoint
	for i, s := range servers {
		eps = append(eps, Endpoint{ID: string(rune('a' + i)), URL: s.URL})
	}
	require.NoError(t, c.SetEndpoints(eps))
	return c, clk, reg
}

// held is a render handler that signals each request's arrival on arrived
// and answers when release is closed; a request whose client goes away is
// reported on canceled and not answered.
type held struct {
	arrived  chan struct{}
	remotes  chan string // each request's client address (its connection)
	release  chan struct{}
	canceled chan struct{}
	inFlight atomic.Int32
	peak     atomic.Int32
}

func newHeld() *held {
	return &held{arrived: make(chan struct{}, 64), remotes: make(chan string, 64), release: make(chan struct{}), canceled: make(chan struct{}, 64)}
}

func (h *held) serve(w http.ResponseWriter, r *http.Request) {
	n := h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	for {
		p := h.peak.Load()
		if n <= p || h.peak.CompareAndSwap(p, n) {
			break
		}
	}
	h.remotes <- r.RemoteAddr
	h.arrived <- struct{}{}
	select {
	case <-h.release:
		vllmRender(w, r)
	case <-r.Context().Done():
		h.canceled <- struct{}{}
	}
}

// renderAsync starts a render and returns where its error will arrive.
func renderAsync(c *Client, req *Request) (<-chan *Result, <-chan error) {
	res, errc := make(chan *Result, 1), make(chan error, 1)
	go func() {
		r, err := c.Render(context.Background(), req)
		res <- r
		errc <- err
	}()
	return res, errc
}

// A render that finds every slot taken waits MaxQueueWait on the clock and
// then fails at once as saturated, without an HTTP attempt and long before
// the budget; the rejection is counted by reason and as a failure.
func TestQueueTimeoutFailsFastAndIsCounted(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs last, after the servers and the client close
	s := newFakeVLLM(t, "a")
	h := newHeld()
	s.on("/v1/completions/render", h.serve)
	c, clk, _ := pressureClient(t, func(cfg *Config) {
		cfg.MaxConcurrency = new(1)
		cfg.MaxQueueWait = new(300 * time.Millisecond)
		cfg.Hedge = new(false)
	}, s)

	_, firstErr := renderAsync(c, completions("first"))
	<-h.arrived
	_, secondErr := renderAsync(c, completions("second"))
	clk.WaitForWaiters(1) // the second render's queue timer
	capa, ok := c.Capacity("a")
	require.True(t, ok)
	require.Equal(t, Capacity{InFlight: 1, Limit: 1, Queued: 1}, capa)
	require.True(t, capa.Saturated())
	clk.Advance(300 * time.Millisecond)

	err := <-secondErr
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, ReasonSaturated, re.Reason)
	require.ErrorIs(t, err, ErrSaturated)
	require.Zero(t, re.Attempts, "no HTTP attempt")
	require.Equal(t, 1, s.hits(""), "the saturated render never reached the renderer")
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.rejected[rejectQueueTimeout]))
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.failures[ReasonSaturated]))

	close(h.release)
	require.NoError(t, <-firstErr)
	capa, _ = c.Capacity("a")
	require.Equal(t, 0, capa.InFlight)
	require.Equal(t, 0, capa.Queued)
	require.Equal(t, 300*time.Millisecond/8, capa.QueueWait, "moving average of the waits 0 and 300 ms")
}

// With MaxQueueWait 0 a render that finds no slot fails at once.
func TestNoQueueFailsAtOnce(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs last, after the servers and the client close
	s := newFakeVLLM(t, "a")
	h := newHeld()
	s.on("/v1/completions/render", h.serve)
	c, _, _ := pressureClient(t, func(cfg *Config) {
		cfg.MaxConcurrency = new(1)
		cfg.MaxQueueWait = new(time.Duration(0))
	}, s)
	_, firstErr := renderAsync(c, completions("first"))
	<-h.arrived
	_, err := c.Render(context.Background(), completions("second"))
	require.ErrorIs(t, err, ErrSaturated)
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.rejected[rejectNoQueue]))
	close(h.release)
	require.NoError(t, <-firstErr)
}

// However many renders are started at once, no endpoint ever has more than
// MaxConcurrency of them in flight; the others wait their turn and all
// succeed once slots come free.
func TestConcurrencyLimitIsRespected(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs last, after the servers and the client close
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	ha, hb := newHeld(), newHeld()
	a.on("/v1/completions/render", ha.serve)
	b.on("/v1/completions/render", hb.serve)
	c, clk, _ := pressureClient(t, func(cfg *Config) {
		cfg.MaxConcurrency = new(2)
		cfg.Hedge = new(false)
	}, a, b)
	const n = 10
	errs := make([]<-chan error, n)
	for i := range n {
		_, errs[i] = renderAsync(c, completions("x"))
	}
	for range 4 { // both endpoints full
		select {
		case <-ha.arrived:
		case <-hb.arrived:
		}
	}
	clk.WaitForWaiters(n - 4) // the others queue
	ca, _ := c.Capacity("a")
	cb, _ := c.Capacity("b")
	require.Equal(t, 2, ca.InFlight)
	require.Equal(t, 2, cb.InFlight)
	require.Equal(t, n-4, ca.Queued+cb.Queued)
	close(ha.release)
	close(hb.release)
	for _, e := range errs {
		require.NoError(t, <-e)
	}
	require.LessOrEqual(t, ha.peak.Load(), int32(2))
	require.LessOrEqual(t, hb.peak.Load(), int32(2))
	require.Equal(t, n, a.hits("")+b.hits(""))
}

// warm gives endpoint id's latency tracker enough samples of d for hedging.
func warm(t *testing.T, c *Client, id string, d time.Duration) {
	t.Helper()
	tg := c.picker.lookup(id)
	require.NotNil(t, tg)
	for range hedgeWarmup {
		tg.st.latency.observe(d)
	}
}

// A render still running at its endpoint's recent p95 is hedged on the
// other endpoint; the hedge answers first and wins, and Render returns at
// once. The first render's request was written whole, so it is not
// canceled, which would close its HTTP/1.1 connection for nothing (the
// renderer tokenizes it anyway): its answer is read and discarded in the
// background, its slot stays taken until then, its latency is a real
// sample, and its connection serves the next render on that endpoint.
func TestHedgeWinsAndTheLoserIsDrained(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs last, after the servers and the client close
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	slow := newHeld()
	a.on("/v1/completions/render", slow.serve)
	c, clk, reg := pressureClient(t, func(*Config) {}, a, b)
	wrote := watchWrites(c)
	warm(t, c, "a", 50*time.Millisecond)
	before, _ := c.picker.lookup("a").st.latency.value()

	res, errc := renderAsync(c, completions("hedged"))
	<-slow.arrived
	<-wrote // the first request is written whole
	firstConn := <-slow.remotes
	clk.WaitForWaiters(1) // the hedge timer, due at about 50 ms
	clk.Advance(time.Second)
	require.NoError(t, <-errc)
	r := <-res
	require.Equal(t, "b", r.Endpoint, "the hedge's answer")
	require.Equal(t, textTokens("hedged"), r.Prompts[0].TokenIDs)
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.hedges[hedgeWon]))
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.loserDrained))
	require.Equal(t, 1, b.hits(""))
	ca, _ := c.Capacity("a")
	require.Equal(t, 1, ca.InFlight, "the renderer still works on the loser: its slot stays taken")

	close(slow.release) // the renderer answers the abandoned render
	require.Eventually(t, func() bool { ca, _ := c.Capacity("a"); return ca.InFlight == 0 },
		10*time.Second, time.Millisecond, "the loser's answer was read and its slot released")
	require.Empty(t, slow.canceled, "the loser was not canceled")
	p95, _ := c.picker.lookup("a").st.latency.value()
	// One sample above the estimate moves it up by one quantile step: the
	// comparison is with the estimate before the render, not a fixed figure.
	require.Greater(t, p95, before, "the loser's real latency (over a second) is a sample")

	// The next renders on a use the loser's connection.
	for len(slow.arrived) == 0 {
		_, err := c.Render(context.Background(), completions("next"))
		require.NoError(t, err)
	}
	require.Equal(t, firstConn, <-slow.remotes, "the loser's connection was kept")

	// The capacity metrics show both endpoints.
	n, err := testutil.GatherAndCount(reg, metricInFlight, metricQueued, metricLimit, metricQueueWaitNow, metricP95)
	require.NoError(t, err)
	require.Equal(t, 2*5, n)
}

// When the first render answers after the hedge was sent, it wins and the
// hedge, its request written whole, is drained in the background and
// counted as lost.
func TestHedgeLosesToTheFirstAndIsDrained(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs last, after the servers and the client close
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	slow, hedgeSide := newHeld(), newHeld()
	a.on("/v1/completions/render", slow.serve)
	b.on("/v1/completions/render", hedgeSide.serve)
	c, clk, _ := pressureClient(t, func(*Config) {}, a, b)
	wrote := watchWrites(c)
	warm(t, c, "a", 20*time.Millisecond)

	res, errc := renderAsync(c, completions("first wins"))
	<-slow.arrived
	clk.WaitForWaiters(1) // the hedge timer, due at about 20 ms
	clk.Advance(time.Second)
	<-hedgeSide.arrived
	<-wrote
	<-wrote // both requests are written whole (the renderer's handler runs once it has the headers)
	close(slow.release)
	require.NoError(t, <-errc)
	require.Equal(t, "a", (<-res).Endpoint)
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.hedges[hedgeLost]))
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.loserDrained))
	close(hedgeSide.release)
	require.Eventually(t, func() bool { cb, _ := c.Capacity("b"); return cb.InFlight == 0 },
		10*time.Second, time.Millisecond, "the hedge's answer was read and its slot released")
	require.Empty(t, hedgeSide.canceled, "the losing hedge was not canceled")
}

// Close cancels every hedge loser left in the background, also one
// abandoned after Close had ended the Client's life but before it stopped
// new abandonments: the life's cancellation had found that exchange still
// running and left it, so Close waited for the loser until its attempt
// ended on its own (AttemptTimeout, or the whole budget without one).
func TestCloseCancelsAHedgeLoserAbandonedAsItCloses(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs last, after the servers and the client close
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	slow := newHeld()
	a.on("/v1/completions/render", slow.serve)
	c, clk, _ := pressureClient(t, func(*Config) {}, a, b)
	wrote := watchWrites(c)
	warm(t, c, "a", 20*time.Millisecond)
	release := sync.OnceFunc(func() { close(slow.release) })
	defer release() // a failing test does not hold the renderer until the attempt timeout

	_, errc := renderAsync(c, completions("x"))
	<-slow.arrived
	<-wrote // a's request is written whole: abandoning it drains it
	// Close's first step, then the window before its second: the life's
	// cancellation has run and found a's exchange still running.
	c.endLife()
	waitGone(t, "(*exchange).cancelAbandoned")
	clk.WaitForWaiters(1)
	clk.Advance(time.Second) // the hedge on b answers at once
	require.NoError(t, <-errc)
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.loserDrained), "a was left to the background")

	select {
	case <-slow.canceled:
	case <-time.After(30 * time.Second):
		t.Fatal("the loser abandoned after the Client's life ended was not canceled")
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited for the loser's own end")
	}
}

// waitGone waits until no goroutine's stack contains frame (one that is
// started but has not run yet included).
func waitGone(t *testing.T, frame string) {
	t.Helper()
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		return !bytes.Contains(buf[:runtime.Stack(buf, true)], []byte(frame))
	}, 10*time.Second, time.Millisecond, "a goroutine still runs %s", frame)
}

// watchWrites reports each request c's exchanges write whole; set before
// any render.
func watchWrites(c *Client) <-chan struct{} {
	ch := make(chan struct{}, 64)
	c.wroteHook = func() { ch <- struct{}{} }
	return ch
}

// A loser whose request is not yet written whole (here a renderer that
// accepts the connection and never reads a 32 MiB body) cannot be left to
// finish: it is canceled, its connection closed, before Render returns, and
// counted as canceled.
func TestHedgeLoserNotYetWrittenIsCanceled(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs last, after the servers and the client close
	// A 4 KiB receive buffer, inherited by accepted connections, keeps the
	// kernel from taking the body in for the renderer that never reads.
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 4)
	go func() {
		defer close(accepted)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- conn // never read
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for conn := range accepted {
			conn.Close()
		}
	})
	b := newFakeVLLM(t, "b")
	// b reads the body without parsing it and answers a fixed prompt.
	b.on("/v1/completions/render", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "["+generateRequest(textTokens("fixed"), "", "")+"]")
	})
	c, clk, _ := pressureClient(t, func(cfg *Config) { cfg.Timeout, cfg.AttemptTimeout = time.Minute, new(time.Minute) }, &fakeVLLM{Server: &httptest.Server{URL: "http://" + ln.Addr().String()}}, b)
	warm(t, c, "a", 20*time.Millisecond)

	res, errc := renderAsync(c, completions(strings.Repeat("x", 16<<20)))
	clk.WaitForWaiters(1) // the hedge timer, due at about 20 ms
	clk.Advance(time.Second)
	require.NoError(t, <-errc)
	require.Equal(t, "b", (<-res).Endpoint)
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.hedges[hedgeWon]))
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.loserCanceled))
	require.Zero(t, testutil.ToFloat64(c.metrics.loserDrained))
	ca, _ := c.Capacity("a")
	require.Zero(t, ca.InFlight, "the canceled loser returned (its slot released) before Render did")
	for r, f := range c.metrics.attemptFailures {
		require.Zero(t, testutil.ToFloat64(f), "a canceled loser is no failed attempt (%s)", r)
	}
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.connClosed[h1pool.CloseCanceled]),
		"the canceled loser closed its connection (never pooled half-written)")
	require.Zero(t, testutil.ToFloat64(c.metrics.connClosed[h1pool.CloseBroken]))
}

// No hedge is sent to an endpoint without a free slot: the hedge is
// skipped (counted) and the first render runs on.
func TestHedgeSkippedWithoutAFreeSlot(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs last, after the servers and the client close
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	ha, hb := newHeld(), newHeld()
	a.on("/v1/completions/render", ha.serve)
	b.on("/v1/completions/render", hb.serve)
	c, clk, _ := pressureClient(t, func(cfg *Config) { cfg.MaxConcurrency = new(1) }, a, b)
	warm(t, c, "a", 20*time.Millisecond)
	// b's only slot is taken first (the round robin sends the first render
	// to a, so take b's slot directly).
	tb := c.picker.lookup("b")
	require.True(t, tb.st.gate.tryAcquire())

	_, errc := renderAsync(c, completions("x"))
	<-ha.arrived
	clk.WaitForWaiters(1) // the hedge timer, due at about 20 ms
	clk.Advance(time.Second)
	require.Eventually(t, func() bool { return testutil.ToFloat64(c.metrics.hedges[hedgeSkipped]) == 1 },
		10*time.Second, time.Millisecond)
	close(ha.release)
	require.NoError(t, <-errc)
	tb.st.gate.release()
	require.Zero(t, hb.peak.Load(), "nothing was sent to the full endpoint")
}

// SetEndpoints keeps an endpoint's load and latency across updates, and an
// endpoint that leaves the set leaves Capacity.
func TestEndpointStateSurvivesUpdates(t *testing.T) {
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	c, _, _ := pressureClient(t, func(*Config) {}, a, b)
	warm(t, c, "a", 30*time.Millisecond)
	before, ok := c.Capacity("a")
	require.True(t, ok)
	require.NotZero(t, before.P95)
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: a.URL}}))
	ca, ok := c.Capacity("a")
	require.True(t, ok)
	require.Equal(t, before.P95, ca.P95)
	require.Equal(t, DefaultMaxConcurrency, ca.Limit)
	_, ok = c.Capacity("b")
	require.False(t, ok)
}

// An endpoint that leaves the set and comes back (a readiness flap) while a
// render holds its only slot keeps that render: Capacity counts it, and with
// MaxQueueWait 0 the next render fails saturated at once, without an HTTP
// attempt, instead of taking a fresh gate's slot and waiting for a
// connection in the transport (capped at MaxConcurrency per host) until its
// caller's deadline.
func TestReaddedEndpointKeepsItsRendersInFlight(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs last, after the servers and the client close
	s := newFakeVLLM(t, "a")
	h := newHeld()
	s.on("/v1/completions/render", h.serve)
	c, _, _ := pressureClient(t, func(cfg *Config) {
		cfg.MaxConcurrency = new(1)
		cfg.MaxQueueWait = new(time.Duration(0))
		cfg.Hedge = new(false)
	}, s)
	_, firstErr := renderAsync(c, completions("first"))
	<-h.arrived
	release := sync.OnceFunc(func() { close(h.release) })
	defer release() // a failing test does not hold the renderer until the attempt timeout

	require.NoError(t, c.SetEndpoints(nil))
	_, ok := c.Capacity("a")
	require.False(t, ok, "a left the set")
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: s.URL}}))
	capa, ok := c.Capacity("a")
	require.True(t, ok)
	require.Equal(t, Capacity{InFlight: 1, Limit: 1}, capa, "the render still in flight on a is counted after the flap")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Render(ctx, completions("second"))
	require.ErrorIs(t, err, ErrSaturated)
	require.NoError(t, ctx.Err(), "failed at once, not at the caller's deadline")
	require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.rejected[rejectNoQueue]))
	require.Equal(t, 1, s.hits(""), "the saturated render never reached the renderer")

	release()
	require.NoError(t, <-firstErr)
	capa, _ = c.Capacity("a")
	require.Zero(t, capa.InFlight)
}

// The state an endpoint leaves behind when it leaves the set is kept while
// its renders run and dropped by a later update once its gate is idle, so
// that endpoint churn does not grow the Client.
func TestRemovedEndpointStateIsDroppedOnceIdle(t *testing.T) {
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	h := newHeld()
	a.on("/v1/completions/render", h.serve)
	c, _, _ := pressureClient(t, func(cfg *Config) { cfg.Hedge = new(false) }, a)
	retired := func() []string {
		c.picker.mu.Lock()
		defer c.picker.mu.Unlock()
		return slices.Sorted(maps.Keys(c.picker.retired))
	}
	_, firstErr := renderAsync(c, completions("first"))
	<-h.arrived
	release := sync.OnceFunc(func() { close(h.release) })
	defer release()

	onlyB := []Endpoint{{ID: "b", URL: b.URL}}
	require.NoError(t, c.SetEndpoints(onlyB))
	require.Equal(t, []string{"a"}, retired())
	require.NoError(t, c.SetEndpoints(onlyB))
	require.Equal(t, []string{"a"}, retired(), "a render still runs on a")

	release()
	require.NoError(t, <-firstErr)
	require.NoError(t, c.SetEndpoints(onlyB))
	require.Empty(t, retired(), "a's gate is idle: its state is dropped")
	require.NoError(t, c.SetEndpoints(nil))
	require.Equal(t, []string{"b"}, retired(), "b is kept for one update")
	require.NoError(t, c.SetEndpoints(nil))
	require.Empty(t, retired())
}

// A gate hands a freed slot to the oldest waiter, and a waiter that gives up
// leaves the queue without taking one.
func TestGateIsFirstComeFirstServed(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs last, after the servers and the client close
	g := &gate{limit: 1}
	clk := telemetry.NewManual(time.Unix(0, 0))
	require.True(t, g.tryAcquire())
	order := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		clk.WaitForWaiters(i)
		wg.Go(func() {
			if g.acquire(context.Background(), clk, time.Hour) == queueGranted {
				order <- i
				g.release()
			}
		})
	}
	clk.WaitForWaiters(3)
	g.release()
	wg.Wait()
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	require.Equal(t, []int{0, 1, 2}, got)
	inFlight, queued := g.load()
	require.Zero(t, inFlight)
	require.Zero(t, queued)

	ctx, cancel := context.WithCancel(context.Background())
	require.True(t, g.tryAcquire())
	done := make(chan queueOutcome)
	go func() { done <- g.acquire(ctx, clk, time.Hour) }()
	require.Eventually(t, func() bool { _, q := g.load(); return q == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	require.Equal(t, queueCtxDone, <-done)
	g.release()
	inFlight, queued = g.load()
	require.Zero(t, inFlight, "the canceled waiter took no slot")
	require.Zero(t, queued)
}

// The latency tracker settles near the 95th percentile of what it sees and
// follows a tenfold slowdown within a few dozen samples.
func TestQuantileTrackerFollowsTheP95(t *testing.T) {
	var q quantileTracker
	_, ok := q.value()
	require.False(t, ok)
	// 1..100 ms, visited in a fixed scrambled order (37 is coprime to 100).
	sample := func(i int, scale time.Duration) time.Duration {
		return time.Duration(1+(i*37)%100) * scale
	}
	for i := range 4000 {
		q.observe(sample(i, time.Millisecond))
	}
	p95, ok := q.value()
	require.True(t, ok)
	require.InDelta(t, 95, float64(p95)/float64(time.Millisecond), 15, "p95 of 1..100 ms, got %v", p95)

	for i := range 60 {
		q.observe(sample(i, 10*time.Millisecond))
	}
	p95, _ = q.value()
	require.Greater(t, p95, 500*time.Millisecond, "after 60 samples of the tenfold slowdown, got %v", p95)

	// A censored sample below the estimate says nothing.
	before, _ := q.value()
	q.observeAtLeast(before / 2)
	after, _ := q.value()
	require.Equal(t, before, after)
}

// The latency tracker follows a drop as it follows a rise, within a few
// dozen samples: one slow first sample (a cold renderer hitting the
// attempt cap) seeded the estimate, and the downward step alone (-0.8 %
// a sample) kept it near a second for hundreds of renders, so the
// endpoint was not hedged and Capacity.P95 reported a latency it no longer
// had; a tenfold drop after a steady state took some 300 samples (now 40
// to 80: see quantileRun).
func TestQuantileTrackerFollowsADrop(t *testing.T) {
	var q quantileTracker
	q.observe(2 * time.Second) // one outlier, the first sample
	for range quantileRun {
		q.observe(5 * time.Millisecond)
	}
	p95, ok := q.value()
	require.True(t, ok)
	require.Equal(t, 5*time.Millisecond, p95, "after one outlier and %d renders of 5 ms", quantileRun)

	// 10..1000 ms, then 1..100 ms, visited in a fixed scrambled order.
	sample := func(i int, scale time.Duration) time.Duration {
		return time.Duration(1+(i*37)%100) * scale
	}
	for i := range 4000 {
		q.observe(sample(i, 10*time.Millisecond))
	}
	p95, _ = q.value()
	require.InDelta(t, 950, float64(p95)/float64(time.Millisecond), 150, "p95 of 10..1000 ms, got %v", p95)
	for i := range 2 * quantileRun {
		q.observe(sample(i, time.Millisecond))
	}
	p95, _ = q.value()
	require.Less(t, p95, 150*time.Millisecond, "after %d samples of the tenfold drop, got %v", 2*quantileRun, p95)
}

func TestPressureConfig(t *testing.T) {
	def := DefaultConfig()
	require.Equal(t, DefaultMaxConcurrency, *def.MaxConcurrency)
	require.Equal(t, DefaultMaxQueueWait, *def.MaxQueueWait)
	require.Equal(t, 500*time.Millisecond, DefaultMaxQueueWait)
	require.True(t, *def.Hedge)

	cfg, err := LoadConfig(strings.NewReader(`{"maxConcurrency": 0, "maxQueueWait": "0s", "hedge": false}`))
	require.NoError(t, err)
	require.Zero(t, *cfg.MaxConcurrency, "0 means no limit")
	require.Zero(t, *cfg.MaxQueueWait, "0 means no wait")
	require.False(t, *cfg.Hedge)

	cfg, err = LoadConfig(strings.NewReader(`{"maxConcurrency": 4, "maxQueueWait": "250ms"}`))
	require.NoError(t, err)
	require.Equal(t, 4, *cfg.MaxConcurrency)
	require.Equal(t, 250*time.Millisecond, *cfg.MaxQueueWait)

	for in, want := range map[string]string{
		`{"maxConcurrency": -1}`:  "maxConcurrency must be >= 0",
		`{"maxQueueWait": "-1s"}`: "maxQueueWait must be >= 0",
		`{"maxQueueWait": 5}`:     "bare number",
		`{"hedge": "yes"}`:        "hedge",
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.ErrorContains(t, err, want, in)
	}

	// A limit of 0 admits every render at once.
	s := newFakeVLLM(t, "a")
	h := newHeld()
	s.on("/v1/completions/render", h.serve)
	c, _, _ := pressureClient(t, func(cfg *Config) { cfg.MaxConcurrency = new(0) }, s)
	var errs []<-chan error
	for range 3 * DefaultMaxConcurrency {
		_, e := renderAsync(c, completions("x"))
		errs = append(errs, e)
	}
	for range 3 * DefaultMaxConcurrency {
		<-h.arrived
	}
	ca, _ := c.Capacity("a")
	require.Equal(t, 3*DefaultMaxConcurrency, ca.InFlight)
	require.False(t, ca.Saturated())
	close(h.release)
	for _, e := range errs {
		require.NoError(t, <-e)
	}
}

// A hedge goes only to an endpoint with fewer renders in flight than the
// first one's: onto an equally loaded renderer it would only add work.
func TestHedgeOnlyToALessLoadedEndpoint(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	a, b := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	ha := newHeld()
	a.on("/v1/completions/render", ha.serve)
	c, clk, _ := pressureClient(t, func(*Config) {}, a, b)
	warm(t, c, "a", 20*time.Millisecond)
	tb := c.picker.lookup("b")
	require.True(t, tb.st.gate.tryAcquire()) // b: one render in flight, as many as a will have

	_, errc := renderAsync(c, completions("x"))
	<-ha.arrived
	clk.WaitForWaiters(1)
	clk.Advance(time.Second)
	require.Eventually(t, func() bool { return testutil.ToFloat64(c.metrics.hedges[hedgeSkipped]) == 1 },
		10*time.Second, time.Millisecond)
	close(ha.release)
	require.NoError(t, <-errc)
	tb.st.gate.release()
	require.Zero(t, b.hits(""))
}

// Hedges stay within 5 % of the renders that may be hedged, plus a burst
// of 10: an empty budget refills by one hedge every 20 renders.
func TestHedgeBudget(t *testing.T) {
	c := newTestClient(t, nil)
	for range hedgeBurst {
		require.True(t, c.takeHedgeToken())
	}
	require.False(t, c.takeHedgeToken(), "the burst is spent")
	for range 19 {
		c.earnHedge()
	}
	require.False(t, c.takeHedgeToken())
	c.earnHedge()
	require.True(t, c.takeHedgeToken(), "20 renders earn one hedge")
	for range 10_000 {
		c.earnHedge()
	}
	require.EqualValues(t, hedgeBurst*hedgeTokenUnit, c.hedgeTokens.Load(), "capped at the burst")
}
