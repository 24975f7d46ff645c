package render

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"
)

// notFoundBody is FastAPI's body of a route that does not exist, the
// answer a render failed at once for a route passed over stands for.
const notFoundBody = `{"detail":"Not Found"}`

// call sends one render POST, bounded by ctx (the whole budget), with at
// most one more attempt on a different endpoint: a hedge when the first
// attempt runs past its endpoint's recent p95, or else a retry when it
// fails retryably. Every attempt holds a slot of its endpoint's gate; a
// render that finds no slot within Config.MaxQueueWait fails with
// ReasonSaturated without an attempt. The answer goes into res (nil:
// discarded). A probe (body.probe) is counted in none of the render metrics
// (metricsFor).
func (c *Client) call(ctx context.Context, r route, body *wireBody, auth string, res *Result) *Error {
	if res == nil {
		res = new(Result)
	}
	m := c.metricsFor(body)
	t, err := c.acquire(ctx, m, body.model, r)
	if err != nil {
		return err
	}
	err, hedged := c.first(ctx, t, r, body, auth, res)
	if err == nil {
		return nil
	}
	// A renderer without render routes cannot render the request, another
	// may (Retryable), but to a probe a legacy renderer's 404 is an answer.
	retry := err.Retryable() && !(body.probe && errors.Is(err.Err, ErrRenderNotEnabled))
	if hedged || !retry || ctx.Err() != nil {
		return err
	}
	t2 := c.picker.pickFree(t, math.MaxInt, body.model, r)
	if t2 == nil {
		if t2 = c.picker.pickExcluding(t, body.model, r); t2 == nil {
			return err
		}
		if c.wait(ctx, m, t2) != nil {
			return err // the first failure stands; the rejection is counted
		}
	}
	err2 := c.timedAttempt(ctx, t2, r, body, auth, 2, res)
	t2.st.gate.release()
	if err2 != nil {
		err2.Attempts = 2
		return err2
	}
	return nil
}

// acquire picks the endpoint of a render on route r and takes one of its
// slots: the round robin's next endpoint when it has one free, else the
// next endpoint that has one, else it waits for the round robin's endpoint
// up to Config.MaxQueueWait. Endpoints whose route r is passed over
// (endpointState.benched) are not picked; when every one serving the
// model is, the render fails at once with ErrRenderNotEnabled, without an
// attempt.
func (c *Client) acquire(ctx context.Context, m *metrics, model string, r route) (*target, *Error) {
	t := c.picker.pick(model, r)
	if t == nil {
		return nil, &Error{Reason: ReasonNoEndpoints, Err: ErrNoEndpoints}
	}
	if t.st.benched(r, c.now().UnixNano()) {
		return nil, &Error{Reason: ReasonStatus, Status: http.StatusNotFound, Endpoint: t.id, Body: notFoundBody, Err: ErrRenderNotEnabled}
	}
	if t.st.gate.tryAcquire() {
		m.queued(t, 0)
		return t, nil
	}
	if t2 := c.picker.pickFree(t, math.MaxInt, model, r); t2 != nil {
		m.queued(t2, 0)
		return t2, nil
	}
	if err := c.wait(ctx, m, t); err != nil {
		return nil, err
	}
	return t, nil
}

// wait waits for a slot of t (Config.MaxQueueWait at most, on the Client's
// clock) and counts a render that gets none in m.
func (c *Client) wait(ctx context.Context, m *metrics, t *target) *Error {
	start := c.now()
	out := t.st.gate.acquire(ctx, c.clk, *c.cfg.MaxQueueWait)
	m.queued(t, c.now().Sub(start))
	switch out {
	case queueGranted:
		return nil
	case queueTimedOut:
		m.rejected[rejectQueueTimeout].Inc()
	case queueNoWait:
		m.rejected[rejectNoQueue].Inc()
	default:
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			m.rejected[rejectDeadline].Inc()
		}
		return &Error{Reason: ReasonTimeout, Endpoint: t.id, Err: ctx.Err()}
	}
	return &Error{Reason: ReasonSaturated, Endpoint: t.id, Err: ErrSaturated}
}

// queued records a render's wait for a slot of t: in t's recent queue wait
// (Capacity) and in m's histogram.
func (m *metrics) queued(t *target, d time.Duration) {
	t.st.queueWait.observe(d)
	m.queueWait.Observe(d.Seconds())
}

// timedAttempt is tracedAttempt with its latency added to t's tracker.
func (c *Client) timedAttempt(ctx context.Context, t *target, r route, body *wireBody, auth string, n int, res *Result) *Error {
	start := c.now()
	err := c.tracedAttempt(ctx, t, r, body, auth, n, res, nil)
	observeLatency(ctx, t, c.now().Sub(start), err)
	return err
}

// observeLatency adds an attempt's duration to its endpoint's tracker:
// answers and timeouts are samples; an attempt canceled by the caller ran
// at least that long; other failures (a refused connection, a 4xx) say
// nothing of the endpoint's latency.
func observeLatency(ctx context.Context, t *target, d time.Duration, err *Error) {
	switch {
	case err == nil:
		t.st.latency.observe(d)
	case err.Reason != ReasonTimeout:
	case errors.Is(ctx.Err(), context.Canceled):
		t.st.latency.observeAtLeast(d)
	default:
		t.st.latency.observe(d)
	}
}

// Hedge budget: every render that may be hedged earns hedgeShare of a
// hedge, up to hedgeBurst hedges, and a hedge spends one, so that hedges
// stay within hedgeShare of the renders (plus the burst) whatever the
// latencies do. Without it, renderers that each take one render at a time
// at a fixed cost (where p95 is the median) hedge on every scheduling
// hiccup, and each hedge delays the next render on the other renderer past
// the threshold too.
const (
	hedgeShare     = 0.05
	hedgeBurst     = 10
	hedgeTokenUnit = 1000 // a hedge in the budget's fixed-point units
)

// earnHedge adds one render's share to the hedge budget.
func (c *Client) earnHedge() {
	for {
		old := c.hedgeTokens.Load()
		if old >= hedgeBurst*hedgeTokenUnit {
			return
		}
		if c.hedgeTokens.CompareAndSwap(old, min(old+int64(hedgeShare*hedgeTokenUnit), hedgeBurst*hedgeTokenUnit)) {
			return
		}
	}
}

// takeHedgeToken spends one hedge of the budget, false when there is none.
func (c *Client) takeHedgeToken() bool {
	for {
		old := c.hedgeTokens.Load()
		if old < hedgeTokenUnit {
			return false
		}
		if c.hedgeTokens.CompareAndSwap(old, old-hedgeTokenUnit) {
			return true
		}
	}
}

func (c *Client) returnHedgeToken() { c.hedgeTokens.Add(hedgeTokenUnit) }

// hedgeDelay returns how long the first attempt on t runs before it is
// hedged, and false when it is not: hedging is off, there is no other
// endpoint, or t's tracker has too few samples.
func (c *Client) hedgeDelay(t *target) (time.Duration, bool) {
	if !*c.cfg.Hedge || c.picker.fixed != nil {
		return 0, false
	}
	if s := c.picker.snap.Load(); s == nil || len(*s) < 2 {
		return 0, false
	}
	p95, ok := t.st.latency.value()
	c.earnHedge()
	return max(p95, minHedgeDelay), ok
}

// first makes the first attempt on t, whose slot it holds, and hedges it on
// another endpoint when it runs past t's recent p95. It reports whether a
// hedge was sent (then both attempts are spent). The first answer wins; the
// loser is abandoned (see exchange): canceled when its request was not yet
// written whole, else left to finish in the background so that its
// connection survives.
func (c *Client) first(ctx context.Context, t *target, r route, body *wireBody, auth string, res *Result) (*Error, bool) {
	m := c.metricsFor(body)
	delay, ok := c.hedgeDelay(t)
	if !ok {
		err := c.timedAttempt(ctx, t, r, body, auth, 1, res)
		t.st.gate.release()
		return err, false
	}
	// Join an edited body's parts here, before the hedge can start: both
	// attempts then only read the joined slice.
	body.flat()
	a := c.launch(ctx, t, r, body, auth, 1, res)
	timer := c.clk.NewTimer(delay)
	select {
	case <-a.done:
		timer.Stop()
		return a.err, false
	case <-timer.C():
	}
	t2 := c.hedgeTarget(t, body.model, r)
	if t2 == nil {
		m.hedges[hedgeSkipped].Inc()
		<-a.done
		return a.err, false
	}
	m.queued(t2, 0)
	hres := new(Result)
	b := c.launch(ctx, t2, r, body, auth, 2, hres)
	select {
	case <-a.done:
		if a.err == nil {
			b.abandon()
			m.hedges[hedgeLost].Inc()
			return nil, true
		}
		<-b.done // the first failed: the hedge runs on as the retry would
	case <-b.done:
		if b.err == nil {
			a.abandon()
			*res = *hres
			m.hedges[hedgeWon].Inc()
			return nil, true
		}
		<-a.done
	}
	switch {
	case a.err == nil:
		m.hedges[hedgeLost].Inc()
		return nil, true
	case b.err == nil:
		*res = *hres
		m.hedges[hedgeWon].Inc()
		return nil, true
	}
	m.hedges[hedgeFailed].Inc()
	b.err.Attempts = 2
	return b.err, true
}

// hedgeTarget returns the endpoint a hedge of a render running on t goes
// to, its slot taken, or nil when there is none (the hedge is skipped): an
// endpoint with a free slot and fewer renders in flight than t (the first
// attempt included), within the hedge budget. A renderer keeps working on a
// render whose client left, so a hedge onto an equally loaded one only adds
// to the load.
func (c *Client) hedgeTarget(t *target, model string, r route) *target {
	if !c.takeHedgeToken() {
		return nil
	}
	inFlight, _ := t.st.gate.load()
	t2 := c.picker.pickFree(t, inFlight, model, r)
	if t2 == nil {
		c.returnHedgeToken()
	}
	return t2
}
