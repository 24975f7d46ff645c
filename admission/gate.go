package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
)

// The dispatch gate (Controller.Hold). Admit is a fleet-wide decision: it
// lets a request through when some candidate is free, and the pick then
// sends it to its cache-warm endpoint, which may be a backlogged one. An
// engine queues first come first served, so an interactive request picked
// onto that endpoint waits behind the sheddable work queued there. The gate
// is the per-endpoint half: after the pick, a sheddable request is sent to
// its endpoint only while that engine has headroom (few waiting requests,
// KV cache not full, Config.Headroom); otherwise it waits at the gateway, a
// few per endpoint, or is shed. The engines' own queues stay short, so the
// requests of higher bands, which the gate never holds, are not stuck behind
// sheddable work, and the pick is not changed: requests still go where
// their prefix is cached.

// Defaults of Config.Headroom.
const (
	// DefaultHeadroomWaiting is the engine's waiting requests (plus the
	// sheddable requests the gate sent since its last scrape) from which
	// sheddable requests are held.
	DefaultHeadroomWaiting = 1
	// DefaultHeadroomKVCache is the engine's KV-cache usage from which
	// sheddable requests are held: 40 % of the KV cache is kept for the
	// requests of higher bands, so that one picked onto the engine finds
	// blocks at once instead of queuing for them (in the routing
	// simulation's overload study, 0.9 and 0.8 left the interactive TTFT
	// p90 at twice the capacity at 354 ms and 154 ms, 0.7 at 126 ms, 0.6 at
	// 107 ms, against 62 ms at half the capacity). A fleet whose higher
	// bands are light can raise it.
	DefaultHeadroomKVCache = 0.6
	// DefaultMaxHeld is how many sheddable requests may wait at the gate
	// per endpoint; a further one is shed at once.
	DefaultMaxHeld = 4
)

// Headroom configures the dispatch gate: the headroom an endpoint's engine
// must have for a sheddable request picked onto it to be sent. Requests of
// bands with priority >= 0 are never held.
type Headroom struct {
	// MaxWaiting: a sheddable request is held while the engine's waiting
	// requests, plus the sheddable requests the gate let through to it since
	// that scrape (over the last Config.Recheck interval when the signal
	// has no scrape time, see EngineSignals), reach this; 0 means
	// DefaultHeadroomWaiting, negative ignores the waiting requests.
	MaxWaiting int `json:"maxWaiting"`
	// MaxKVCache: a sheddable request is held while the engine's KV-cache
	// usage (0 to 1) reaches this; 0 means DefaultHeadroomKVCache, negative
	// ignores the KV cache.
	MaxKVCache float64 `json:"maxKVCache"`
	// MaxHeld bounds the sheddable requests waiting at the gate per
	// endpoint; a further one is shed at once. 0 means DefaultMaxHeld.
	MaxHeld int `json:"maxHeld"`
	// Disabled turns the gate off: Hold returns at once.
	Disabled bool `json:"disabled"`
}

// EngineSignals is the engines' scraped state the gate reads: an
// enginemetrics.Scraper. fresh is false when the endpoint has no recent
// successful scrape; the gate then judges it by kvroute's own accounting
// (a stale signal never counts as headroom). Signal.Scraped tells the gate
// when the engine's counts were taken, so that it also counts the
// sheddable requests it sent since (Headroom.MaxWaiting). A signal whose
// Scraped is zero names no such time: the gate then times the count
// itself, restarting it once a re-check interval (Config.Recheck) passed,
// so that at most MaxWaiting go out per interval while the signal shows
// room, and no request is held for good by sends the signal never shows; a
// host's EngineSignals should set Scraped.
type EngineSignals interface {
	Signal(ep kvroute.Endpoint) (sig enginemetrics.Signal, fresh bool)
}

// gateEndpoint is one endpoint's side of the gate, owned by Controller.mu.
type gateEndpoint struct {
	ep      kvroute.Endpoint
	held    []*heldReq // waiting, in release order (band priority, then arrival)
	scraped time.Time  // the scrape sent counts from
	sent    int        // sheddable requests let through since that scrape
}

// heldReq is one request waiting at the gate.
type heldReq struct {
	band     *band
	seq      uint64
	enqueued time.Time
	done     chan error // receives the outcome once (buffered)
	out      bool       // released or removed
	// Once released: the gate state whose sent count it joined, and that
	// count's scrape, so that a caller found gone at the release takes it
	// back (unsend).
	gate    *gateEndpoint
	scraped time.Time
}

// Gate outcomes, counted in kvroute_admission_gate_requests_total.
const (
	gPassed = iota // sent at once
	gHeld          // waited at the gate
	gSent          // left the gate for its endpoint
	gShed          // refused: the endpoint's gate was full
	gExpired
	gCancelled
	gClosed
)

var gateOutcomes = [...]string{"passed", "held", "sent", outcomeShed, outcomeExpired, outcomeCancelled, outcomeClosed}

func newGateMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_admission_gate_requests_total",
		Help: "Sheddable requests through the per-endpoint dispatch gate by priority band and outcome: passed (sent at once), held, sent (after waiting), shed, expired, cancelled, closed.",
	}, []string{"priority", "outcome"})
}

// Held returns the number of requests waiting at the dispatch gate.
func (c *Controller) Held() int { return int(c.nheld.Load()) }

// Hold is the dispatch gate: the host calls it after the pick, before
// sending the request to ep (the Decision's endpoint), with the context
// given to Pick. A request whose band has priority >= 0 returns nil at once,
// without allocating, and so does every request when the Controller has no
// EngineSignals (Options.Signals) or Config.Headroom.Disabled is set: the
// gate reads the engines' queues, which kvroute's own accounting (already
// consulted by Admit, and holding this request's own load) does not see. A
// sheddable request returns nil when ep's engine has headroom
// (Config.Headroom, judged on its fresh signal; with the signal stale, on
// kvroute's own accounting, except that the load of the requests at ep's
// gate, its own included, holds none of them: when nothing else is in
// flight on ep, the first goes) and nothing else waits at ep's gate;
// otherwise it waits, in band then arrival order, until ep has headroom and
// no request of a higher band that may go to ep (ep is among its
// candidates) waits in the admission queue (nil), its queue
// deadline passes (ErrExpired), ctx ends (ctx's error) or Close runs
// (ErrClosed). The queue deadline is the request's (WithDeadline) or its
// objective's queue timeout from its arrival to Admit, when ctx carries the
// request's record (Track, FromHeader), else from this call. With the
// record Hold also drops the claim Admit's release of the request took
// (the pick is known), for requests of every band, so a host calls Hold
// after every pick. A queued higher band does not keep the first of them back
// when ep is saturated in kvroute's own accounting by the requests held at
// its gate alone: no queued request could have ep before one of them is
// sent. When MaxHeld requests already wait at ep's gate it is shed at
// once (ErrShed). On an error the host must not send the request and must
// end its Decision (Done), as for a request that failed. An objective not
// in Config.Objectives is counted by Admit, not again here.
func (c *Controller) Hold(ctx context.Context, ep kvroute.Endpoint) error {
	var arrived time.Time
	if rec := recordOf(ctx); rec != nil {
		var released *waiter
		if arrived, released = rec.picked(); released != nil {
			c.unclaim(released) // the pick is known: its claim has done its work
		}
	}
	o := c.objectiveOf(ctx, false) // Admit counted an unknown objective
	if o.band.priority >= 0 || c.cfg.Headroom.Disabled || c.signals == nil {
		return nil
	}
	now := c.clock.Now()
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		c.gateCount(o.band, gClosed)
		return ErrClosed
	}
	g := c.gateLocked(ep)
	if len(g.held) == 0 && !c.higherBlocksLocked(o.band, ep, 1) && c.headroomLocked(ep, g, 1) {
		g.sent++
		c.mu.Unlock()
		c.gateCount(o.band, gPassed)
		return nil
	}
	if len(g.held) >= c.cfg.Headroom.MaxHeld {
		c.dropIdleLocked(ep.ID, g)
		c.mu.Unlock()
		c.gateCount(o.band, gShed)
		return fmt.Errorf("%w: the picked endpoint's engine has no headroom and its dispatch gate already holds headroom.maxHeld %d requests",
			ErrShed, c.cfg.Headroom.MaxHeld)
	}
	start := now // the queue timeout counts from the arrival to Admit (Track)
	if !arrived.IsZero() && arrived.Before(now) {
		start = arrived
	}
	deadline := start.Add(o.timeout)
	if t, ok := deadlineOf(ctx); ok {
		deadline = t
	}
	if !deadline.After(now) {
		c.mu.Unlock()
		c.gateCount(o.band, gExpired)
		return ErrExpired
	}
	c.seq++
	h := &heldReq{band: o.band, seq: c.seq, enqueued: now, done: make(chan error, 1)}
	i := len(g.held)
	for i > 0 && g.held[i-1].band.priority < h.band.priority {
		i--
	}
	g.held = append(g.held, nil)
	copy(g.held[i+1:], g.held[i:])
	g.held[i] = h
	c.nheld.Add(1)
	c.gateCount(o.band, gHeld)
	c.armLocked()
	c.mu.Unlock()

	timer := c.clock.NewTimer(deadline.Sub(now))
	defer timer.Stop()
	select {
	case err := <-h.done:
		if err == nil {
			c.gateCount(h.band, gSent)
		}
		return err
	case <-ctx.Done():
		if c.unhold(ep.ID, h, gCancelled) {
			return ctx.Err()
		}
	case <-timer.C():
		if c.unhold(ep.ID, h, gExpired) {
			return ErrExpired
		}
	}
	err := <-h.done // decided before the cancellation or the deadline
	if err == nil && ctx.Err() != nil {
		// Released, but the caller left: nothing is sent, so the
		// endpoint's sent count gives its place back at once.
		c.unsend(h)
		c.gateCount(h.band, gCancelled)
		return ctx.Err()
	}
	if err == nil {
		c.gateCount(h.band, gSent)
	}
	return err
}

// unsend takes back the sent count of a released request whose caller left
// instead of sending it, unless a newer scrape restarted the count (which
// then never held it), and serves the gates and the queue.
func (c *Controller) unsend(h *heldReq) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := h.gate
	if c.gates[g.ep.ID] != g || !g.scraped.Equal(h.scraped) || g.sent == 0 {
		return
	}
	g.sent--
	c.dropIdleLocked(g.ep.ID, g)
	c.dispatchLocked()
}

// gateCount counts one gate outcome of band b.
func (c *Controller) gateCount(b *band, outcome int) { b.m.gate[outcome].Inc() }

// gatePruneMin is the size of the gate map from which gateLocked prunes it.
const gatePruneMin = 64

// gateLocked returns ep's gate state, creating it. Before creating one it
// prunes the map once it has doubled since the last prune (and holds at
// least gatePruneMin entries): the re-check prunes only while requests
// wait, are claimed or are held, and a request that passes at once leaves
// its endpoint's sent count behind, so without this the map would grow with
// every endpoint ever picked. That keeps it within twice the endpoints in
// use, at an amortised constant cost per entry created.
func (c *Controller) gateLocked(ep kvroute.Endpoint) *gateEndpoint {
	g := c.gates[ep.ID]
	if g == nil {
		if len(c.gates) >= c.gatesPruneAt {
			c.pruneGatesLocked()
			c.gatesPruneAt = max(2*len(c.gates), gatePruneMin)
		}
		g = &gateEndpoint{ep: ep}
		c.gates[ep.ID] = g
	}
	return g
}

// dropIdleLocked forgets ep's gate state once nothing waits there and no
// sent count is pending, so the map holds only endpoints in use.
func (c *Controller) dropIdleLocked(ep string, g *gateEndpoint) {
	if len(g.held) == 0 && g.sent == 0 {
		delete(c.gates, ep)
	}
}

// pruneGatesLocked forgets the state of every endpoint where nothing waits
// and whose sent count no longer matters: a newer scrape came or, for a
// signal without a scrape time, a re-check interval passed (the count
// would restart; countFromLocked), or the signal went stale (the own
// accounting decides). The re-check runs it, and gateLocked as the map
// grows, so the gates of endpoints that are gone do not stay.
func (c *Controller) pruneGatesLocked() {
	for id, g := range c.gates {
		if len(g.held) > 0 {
			continue
		}
		if sig, fresh := c.signals.Signal(g.ep); !fresh || !c.countFromLocked(sig, g).Equal(g.scraped) {
			delete(c.gates, id)
		}
	}
}

// unhold takes a held request whose caller gave up out of its gate; false
// when it had already left (its outcome is in h.done).
func (c *Controller) unhold(ep string, h *heldReq, outcome int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.out {
		return false
	}
	g := c.gates[ep]
	for i, x := range g.held {
		if x == h {
			g.held = append(g.held[:i], g.held[i+1:]...)
			break
		}
	}
	h.out = true
	c.nheld.Add(-1)
	c.gateCount(h.band, outcome)
	c.dropIdleLocked(ep, g)
	return true
}

// higherQueuedLocked reports whether a request of a band above b that may
// go to ep (ep is among its candidates) waits in the admission queue: the
// gate then sends nothing of b to ep, so that a sheddable request never
// takes headroom a queued higher-band request is waiting for. A queued
// request whose candidates do not include ep (another model's, say) does
// not wait for ep's headroom and keeps nothing back there.
func (c *Controller) higherQueuedLocked(b *band, ep string) bool {
	for _, x := range c.bands {
		if x.priority <= b.priority {
			return false
		}
		if x.wants[ep] > 0 {
			return true
		}
	}
	return false
}

// higherBlocksLocked reports whether a queued request of a band above b
// keeps b's requests held at ep's gate (unsent of them, the one Hold decides
// on included) from being sent: a request of a higher band that may go to
// ep waits in the admission queue, unless ep is saturated in kvroute's own accounting by
// the held requests alone (nothing else is in flight on it). Their picks
// committed their load, so no queued request can have ep until one of them
// is sent and its prefill ends: holding them for the queued request would
// keep both waiting until a deadline.
func (c *Controller) higherBlocksLocked(b *band, ep kvroute.Endpoint, unsent int) bool {
	if !c.higherQueuedLocked(b, ep.ID) {
		return false
	}
	if s, _ := c.own.Saturation(ep); !s {
		return true
	}
	_, open := c.own.version(ep.ID)
	return open > int64(unsent)
}

// headroomLocked reports whether ep's engine has room for one more
// sheddable request: by its fresh engine signal, counting the requests the
// gate sent since that scrape; without one, by kvroute's own accounting.
// That accounting already counts the requests waiting at ep's gate, whose
// picks committed their load before Hold, although none of them reached
// the engine: unsent is how many there are (the request Hold decides on
// included), and when ep's open requests are no more than that, nothing
// else is in flight on ep and the engine has room, whatever their own load.
// Without this a sheddable request whose own prompt reaches the token
// threshold waited for its own load until its deadline.
func (c *Controller) headroomLocked(ep kvroute.Endpoint, g *gateEndpoint, unsent int) bool {
	sig, fresh := c.signals.Signal(ep)
	if !fresh {
		if s, _ := c.own.Saturation(ep); !s {
			return true
		}
		_, open := c.own.version(ep.ID)
		return open <= int64(unsent)
	}
	if from := c.countFromLocked(sig, g); !from.Equal(g.scraped) {
		g.scraped, g.sent = from, 0
	}
	h := c.cfg.Headroom
	if h.MaxKVCache >= 0 && sig.KVCacheUsage >= h.MaxKVCache {
		return false
	}
	return h.MaxWaiting < 0 || sig.Waiting+g.sent < h.MaxWaiting
}

// countFromLocked is the time g's sent count counts from under the fresh
// signal sig: its scrape time. A signal without one (zero Scraped) gets the
// gate's own: the count goes on from when it began until a re-check
// interval passed, then restarts now. Restarting it at every read instead
// would let every held request out in one pass, and never restarting it
// would hold them for good once MaxWaiting were sent.
func (c *Controller) countFromLocked(sig enginemetrics.Signal, g *gateEndpoint) time.Time {
	if !sig.Scraped.IsZero() {
		return sig.Scraped
	}
	now := c.clock.Now()
	if g.scraped.IsZero() || now.Sub(g.scraped) >= c.cfg.Recheck || now.Before(g.scraped) {
		return now
	}
	return g.scraped
}

// serveGatesLocked sends held requests to every endpoint that has headroom,
// unless a request of a higher band that may go there waits in the
// admission queue (higherBlocksLocked).
func (c *Controller) serveGatesLocked() {
	if c.nheld.Load() == 0 {
		return
	}
	for _, g := range c.gates {
		for len(g.held) > 0 {
			h := g.held[0]
			if c.higherBlocksLocked(h.band, g.ep, len(g.held)) || !c.headroomLocked(g.ep, g, len(g.held)) {
				break
			}
			g.held = g.held[1:]
			g.sent++
			h.out, h.gate, h.scraped = true, g, g.scraped
			c.nheld.Add(-1)
			h.done <- nil // Hold counts it sent, or cancelled if its caller left
		}
	}
}

// closeGatesLocked refuses every held request with ErrClosed.
func (c *Controller) closeGatesLocked() {
	for id, g := range c.gates {
		for _, h := range g.held {
			h.out = true
			c.nheld.Add(-1)
			c.gateCount(h.band, gClosed)
			h.done <- ErrClosed
		}
		delete(c.gates, id)
	}
}
