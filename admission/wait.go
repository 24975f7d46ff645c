package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/kvroute/kvroute"
)

// admitSlow is Admit when the queue is not empty, a claim is held or every
// candidate is saturated.
// rec is the request's record (Track), or nil: a released request notes
// itself there, so that Hold hands its claim off once the pick is known.
func (c *Controller) admitSlow(ctx context.Context, req *kvroute.Request, endpoints []kvroute.Endpoint, o objective, rec *record) error {
	b := o.band
	now := c.clock.Now()
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		b.m.count[oClosed].Inc()
		return ErrClosed
	}
	w := &waiter{eps: endpoints, idx: -1, ctx: ctx}
	if c.queued.Load() == 0 && c.freeLocked(w, now) >= 0 {
		c.mu.Unlock()
		b.m.count[oAdmitted].Inc()
		return nil
	}
	if b.priority < 0 && c.allSaturated(endpoints) {
		c.mu.Unlock()
		b.m.count[oShed].Inc()
		return ErrShed
	}
	deadline := now.Add(o.timeout)
	if t, ok := deadlineOf(ctx); ok {
		deadline = t
	}
	if !deadline.After(now) {
		c.mu.Unlock()
		b.m.count[oExpired].Inc()
		return ErrExpired
	}
	w.cost, w.bytes = estimate(req)
	key := fairnessOf(ctx)
	if key == "" {
		key = c.cfg.DefaultFlow
	}
	if !c.fitsLocked(c.queued.Load(), c.bytes, w) && c.leavesAtOnceLocked(w, b, key, now) {
		c.mu.Unlock()
		b.m.count[oAdmitted].Inc()
		return nil
	}
	if err := c.makeRoomLocked(w, b); err != nil {
		c.mu.Unlock()
		return err
	}
	c.seq++
	w.seq, w.enqueued, w.deadline = c.seq, now, deadline
	w.done = make(chan error, 1)
	b.push(w, key, c.cfg.Ordering == EarliestDeadline, c.cfg.Fairness == DeficitRoundRobin)
	c.queued.Add(1)
	c.bytes += w.bytes
	b.m.count[oQueued].Inc()
	c.armLocked()
	c.dispatchLocked()
	c.mu.Unlock()

	timer := c.clock.NewTimer(deadline.Sub(now))
	defer timer.Stop()
	select {
	case err := <-w.done:
		if err == nil && rec != nil {
			rec.release(w)
		}
		return err
	case <-ctx.Done():
		if c.leave(w, oCancelled, lCancelled) {
			return ctx.Err()
		}
	case <-timer.C():
		if c.leave(w, oExpired, lTTL) {
			return ErrExpired
		}
	}
	// The outcome was decided before the cancellation or the deadline.
	err := <-w.done
	if err == nil && ctx.Err() != nil {
		// Released, but the caller left: no pick will move the claimed
		// endpoint's accounting, so its claim would hold the endpoint
		// from the queue until Settle.
		c.unclaim(w)
		return ctx.Err()
	}
	if err == nil && rec != nil {
		rec.release(w)
	}
	return err
}

// Abandon tells the Controller that the request of ctx, which Admit
// admitted, will not be held: its pick failed, or the host gives up on it
// before sending it. With the request's record (Track, FromHeader) the
// claim Admit's release of it took is dropped at once and the queue
// served, so the endpoint is not kept from the rest of the queue until the
// request's context ends (or Settle passes) for a request that is not
// coming. The Router calls it when Pick or Match fails after the admission
// and when a Selection of Match is released without a Commit; a host that
// admits requests itself calls it when it does not send one. Without the
// record it does nothing (the claim goes when the request's context ends,
// see the package doc); after Hold, or a second time, it does nothing.
func (c *Controller) Abandon(ctx context.Context) {
	if rec := recordOf(ctx); rec != nil {
		if _, released := rec.picked(); released != nil {
			c.unclaim(released)
		}
	}
}

// unclaim drops the claim w's release took, if it is still w's, and serves
// the queue: w's caller left (no pick follows), or its pick is known (Hold
// with the request's record), and either way the claim, taken on whichever
// free candidate the release found, has done its work: the pick's load
// shows in the accounting of the endpoint it chose, which may be another.
func (c *Controller) unclaim(w *waiter) { c.unclaimBy(w.claimed, w.seq) }

// unclaimBy is unclaim of the claim on ep by the request of sequence seq:
// nothing when ep's claim is gone or another request's, so that each
// claim is given back once whoever (Hold, Abandon, the end of the
// request's context, a re-admission) comes first.
func (c *Controller) unclaimBy(ep string, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.claims[ep]; ok && cl.by == seq {
		c.dropClaimLocked(ep)
		c.dispatchLocked()
	}
}

// leave takes a waiter whose caller gave up out of the queue and counts it;
// false when it had already left (its outcome is in w.done). It serves the
// queue and the gates: what w kept back (the next request of its flow, a
// lower band's request held at a gate for it) may go now.
func (c *Controller) leave(w *waiter, outcome, llmd int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.idx < 0 {
		return false
	}
	c.finishLocked(w, outcome, llmd, nil)
	<-w.done // finishLocked's send, not wanted: the caller returns its own error
	c.dispatchLocked()
	return true
}

// finishLocked takes w out of the queue, counts its outcome and queue time
// and sends err to its caller.
func (c *Controller) finishLocked(w *waiter, outcome, llmd int, err error) {
	b := w.band
	b.remove(w)
	c.queued.Add(-1)
	c.bytes -= w.bytes
	b.m.count[outcome].Inc()
	b.m.queueTime[llmd].Observe(c.clock.Now().Sub(w.enqueued).Seconds())
	w.done <- err
}

// makeRoomLocked bounds the queue: when w would overflow it, the oldest
// requests of the lowest sheddable bands (at most b's priority) are pushed
// out (ErrShed) until w fits; when pushing out all of them would not make
// room, none is, and w itself is refused (ErrShed if sheddable, else
// ErrQueueFull). Each refusal names the bound that refused it.
func (c *Controller) makeRoomLocked(w *waiter, b *band) error {
	refuse := func(format string, args ...any) error {
		err := ErrQueueFull
		if b.priority < 0 {
			b.m.count[oShed].Inc()
			err = ErrShed
		} else {
			b.m.count[oQueueFull].Inc()
		}
		return fmt.Errorf("%w: "+format, append([]any{err}, args...)...)
	}
	if w.bytes > c.cfg.MaxQueuedBytes {
		return refuse("the request's estimated %d bytes exceed maxQueuedBytes %d, so it cannot wait however empty the queue is",
			w.bytes, c.cfg.MaxQueuedBytes)
	}
	fits := func(n, bytes int64) bool { return c.fitsLocked(n, bytes, w) }
	if fits(c.queued.Load(), c.bytes) {
		return nil
	}
	n, bytes := c.queued.Load(), c.bytes // what stays once every victim is out
	for _, x := range c.bands {
		if x.priority < 0 && x.priority <= b.priority {
			n, bytes = n-int64(x.n), bytes-x.bytes
		}
	}
	if !fits(n, bytes) { // shedding would not let w in: shed nothing
		return refuse("%d requests of %d estimated bytes wait (maxQueuedRequests %d, maxQueuedBytes %d), and pushing out the sheddable ones would not make room for its %d bytes",
			c.queued.Load(), c.bytes, c.cfg.MaxQueuedRequests, c.cfg.MaxQueuedBytes, w.bytes)
	}
	pushed := fmt.Errorf("%w: pushed out of the full queue (maxQueuedRequests %d, maxQueuedBytes %d) for a request of priority %d",
		ErrShed, c.cfg.MaxQueuedRequests, c.cfg.MaxQueuedBytes, b.priority)
	for i := len(c.bands) - 1; i >= 0; i-- {
		x := c.bands[i] // the lowest band first
		if x.priority >= 0 || x.priority > b.priority || fits(c.queued.Load(), c.bytes) {
			break
		}
		if x.n == 0 {
			continue
		}
		c.aged += uint64(x.n)
		c.finishLocked(x.oldest(), oShed, lOther, pushed)
		if x.n == 0 || fits(c.queued.Load(), c.bytes) {
			continue
		}
		// More of x must go: sort its requests by age once rather than
		// scan the band again for each (a large request may push out
		// thousands of small ones).
		aged := x.byAge()
		c.aged += uint64(len(aged))
		for _, v := range aged {
			if fits(c.queued.Load(), c.bytes) {
				break
			}
			c.finishLocked(v, oShed, lOther, pushed)
		}
	}
	if !fits(c.queued.Load(), c.bytes) { // not reached: the victims were counted above
		return refuse("the queue has no sheddable request left to push out")
	}
	return nil
}

// fitsLocked reports whether w fits in a queue holding n requests of
// bytes estimated bytes.
func (c *Controller) fitsLocked(n, bytes int64, w *waiter) bool {
	return n+1 <= int64(c.cfg.MaxQueuedRequests) && bytes+w.bytes <= c.cfg.MaxQueuedBytes
}

// leavesAtOnceLocked reports whether w, which the full queue has no room
// for, would leave it at once if queued: with the queue served first (a
// dispatch pass, so that what is free goes to the requests already
// waiting), one of w's candidates is still free and no request of w's flow
// is queued (its requests leave in order). Such a request never waits, so
// a full queue neither refuses it nor pushes anything out for it: a queue
// filled by requests for saturated endpoints does not turn away the
// requests of idle ones (another model's, say).
func (c *Controller) leavesAtOnceLocked(w *waiter, b *band, key string, now time.Time) bool {
	c.dispatchLocked()
	return b.flows[key] == nil && c.freeLocked(w, now) >= 0
}

// dispatchLocked releases queued requests while some has a free candidate:
// the highest band first; within a band, flows in turn. Endpoints found
// busy are remembered for the pass, so that a pass over many flows waiting
// for the same endpoints checks each endpoint once, and once every endpoint
// the queue names is busy the pass looks at no further candidate: with as
// many flows as requests (fairness IDs come from clients) a pass costs
// then one step per flow, not one per flow and candidate.
func (c *Controller) dispatchLocked() {
	now := c.clock.Now()
	clear(c.busy)
	c.wanted = c.wantedLocked()
	free := func(w *waiter) int { return c.freeInPassLocked(w, now) }
	drr := c.cfg.Fairness == DeficitRoundRobin
	for {
		var w *waiter
		ep := -1
		for _, b := range c.bands {
			if w, ep = b.next(free, drr, c.cfg.Quantum); w != nil {
				break
			}
		}
		if w == nil {
			c.serveGatesLocked()
			return
		}
		id := w.eps[ep].ID
		c.claimLocked(id, now, w)
		w.claimed = id
		c.busy[id] = struct{}{}
		c.finishLocked(w, oDispatched, lDispatched, nil)
	}
}

// wantedLocked returns how many distinct endpoints the queued requests
// name among their candidates. Every endpoint a pass finds busy is one of
// them, so once as many are busy no queued request has a free candidate.
func (c *Controller) wantedLocked() int {
	n, bands := 0, 0
	for _, b := range c.bands {
		if len(b.wants) > 0 {
			n, bands = len(b.wants), bands+1
		}
	}
	if bands <= 1 {
		return n
	}
	clear(c.union)
	for _, b := range c.bands {
		for id := range b.wants {
			c.union[id] = struct{}{}
		}
	}
	return len(c.union)
}

// freeInPassLocked is freeLocked for one dispatch pass, skipping and
// recording the endpoints found busy (c.busy), and finding none free at
// once when every endpoint the queue names is busy (c.wanted).
func (c *Controller) freeInPassLocked(w *waiter, now time.Time) int {
	for i, ep := range w.eps {
		if len(c.busy) >= c.wanted {
			return -1
		}
		c.scanned++
		if _, busy := c.busy[ep.ID]; busy {
			continue
		}
		if !c.claimedLocked(ep.ID, now) && !c.saturated(ep) {
			return i
		}
		c.busy[ep.ID] = struct{}{}
	}
	return -1
}

// allSaturated reports whether every candidate is saturated (claims aside:
// they are the Controller's own short-lived bookkeeping, not saturation).
func (c *Controller) allSaturated(eps []kvroute.Endpoint) bool {
	for _, ep := range eps {
		if !c.saturated(ep) {
			return false
		}
	}
	return true
}

// freeLocked returns the index of one of w's candidates that is neither
// saturated nor claimed, or -1.
func (c *Controller) freeLocked(w *waiter, now time.Time) int {
	for i, ep := range w.eps {
		if !c.claimedLocked(ep.ID, now) && !c.saturated(ep) {
			return i
		}
	}
	return -1
}

// claimLocked marks ep as just given the queued request w, and watches
// w's context: the claim goes when the request ends (it may end without a
// Hold or an Abandon naming it: a host without the request's record, or
// one that neither sends nor abandons it).
func (c *Controller) claimLocked(ep string, now time.Time, w *waiter) {
	tokens, open := c.own.version(ep)
	c.dropClaimLocked(ep) // none in practice: dispatch claims only free endpoints
	cl := claim{tokens: tokens, open: open, at: now, by: w.seq}
	if w.ctx.Done() != nil {
		seq := w.seq
		cl.stop = context.AfterFunc(w.ctx, func() { c.unclaimBy(ep, seq) })
	}
	c.nclaims.Add(1)
	c.claims[ep] = cl
}

// claimedLocked reports whether ep holds a live claim, dropping a lapsed
// one: its accounting moved or Settle passed.
func (c *Controller) claimedLocked(ep string, now time.Time) bool {
	cl, ok := c.claims[ep]
	if !ok {
		return false
	}
	tokens, open := c.own.version(ep)
	if tokens == cl.tokens && open == cl.open && now.Sub(cl.at) < c.cfg.Settle {
		return true
	}
	c.dropClaimLocked(ep)
	return false
}

// dropClaimLocked drops ep's claim, if any, and stops its watch.
func (c *Controller) dropClaimLocked(ep string) {
	if cl, ok := c.claims[ep]; ok {
		if cl.stop != nil {
			cl.stop()
		}
		delete(c.claims, ep)
		c.nclaims.Add(-1)
	}
}

// armLocked arms the re-check if it is not armed.
func (c *Controller) armLocked() {
	if c.armed || c.closed.Load() {
		return
	}
	c.armed = true
	c.pending.Add(1)
	if c.timer == nil {
		c.timer = c.clock.AfterFunc(c.cfg.Recheck, c.recheck)
		return
	}
	c.timer.Reset(c.cfg.Recheck)
}

// recheck serves the queue on the clock, for releases nobody notified, and
// lets lapsed claims go; it re-arms while requests wait or claims are held.
func (c *Controller) recheck() {
	defer c.pending.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	if c.closed.Load() {
		return
	}
	now := c.clock.Now()
	for ep := range c.claims {
		c.claimedLocked(ep, now)
	}
	c.dispatchLocked()
	if c.signals != nil {
		c.pruneGatesLocked()
	}
	if c.queued.Load() > 0 || len(c.claims) > 0 || c.nheld.Load() > 0 {
		c.armLocked()
	}
}

// estimate returns a request's prompt tokens and bytes: the rendered
// prompts' tokens when the host gave them, else a quarter of the body's
// bytes; bytes are the body plus four per prompt token.
func estimate(req *kvroute.Request) (tokens, bytes int64) {
	if req == nil {
		return 1, 0
	}
	for _, p := range req.Prompts {
		tokens += int64(len(p.TokenIDs))
	}
	bytes = int64(len(req.Body)) + 4*tokens
	if tokens == 0 {
		tokens = int64(len(req.Body)) / 4
	}
	return max(tokens, 1), bytes
}
