package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvroute/kvroute/kvindex"
)

// flushBytes is the size at which the publisher starts another message.
const flushBytes = 256 << 10

// slot is one queued decision; its keys buffer is reused, so a warm queue
// takes no allocation.
type slot struct {
	endpoint string
	keys     []kvindex.Key
}

// decisionQueue is a bounded queue of decisions, double-buffered: Publish
// copies into the active half under a mutex held for one copy of the keys, and
// the publisher swaps halves in O(1), then encodes and sends the full half
// without holding the lock. Memory: 2 × DecisionQueue × MaxKeysPerDecision ×
// 8 bytes, allocated up front (1 MiB with the defaults).
type decisionQueue struct {
	mu     sync.Mutex
	active []slot
	n      int
	spare  []slot
	closed bool
	wake   chan struct{}
}

// init sizes the queue: size decisions of at most maxKeys keys per half, in
// one allocation, so that Publish never allocates.
func (q *decisionQueue) init(size, maxKeys int) {
	q.active, q.spare = make([]slot, size), make([]slot, size)
	backing := make([]kvindex.Key, 2*size*maxKeys)
	for i := range q.active {
		q.active[i].keys = backing[:0:maxKeys]
		backing = backing[maxKeys:]
		q.spare[i].keys = backing[:0:maxKeys]
		backing = backing[maxKeys:]
	}
	q.wake = make(chan struct{}, 1)
}

// push queues a decision; false when the queue is full or closed.
func (q *decisionQueue) push(endpoint string, keys []kvindex.Key) bool {
	q.mu.Lock()
	if q.closed || q.n == len(q.active) {
		q.mu.Unlock()
		return false
	}
	s := &q.active[q.n]
	s.endpoint = endpoint
	s.keys = append(s.keys[:0], keys...)
	q.n++
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// take swaps the halves of both queues (decisions, and dq's load changes,
// which share the lock) and returns what was queued, valid until the next
// take.
func (q *decisionQueue) take(dq *deltaQueue) ([]slot, []delta) {
	q.mu.Lock()
	defer q.mu.Unlock()
	full := q.active[:q.n]
	q.active, q.spare, q.n = q.spare, q.active, 0
	deltas := dq.active[:dq.n]
	dq.active, dq.spare, dq.n = dq.spare, dq.active, 0
	return full, deltas
}

func (q *decisionQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

// Publish shares a routing decision with the other replicas: endpoint was
// chosen for a request whose leading block keys are keys (at most
// MaxKeysPerDecision are sent). It never blocks on Redis and does not
// allocate once the queue is warm: the decision is copied into a bounded
// queue that a background goroutine publishes; a full queue drops it
// (counted). A nil Replica, or one with shared decisions off, does nothing.
func (r *Replica) Publish(endpoint string, keys []kvindex.Key) {
	if r == nil || r.cfg.DisableSharedDecisions || len(keys) == 0 {
		return
	}
	if len(keys) > r.cfg.MaxKeysPerDecision {
		keys = keys[:r.cfg.MaxKeysPerDecision]
		r.met.truncated.Inc()
	}
	if !r.q.push(endpoint, keys) {
		r.stats.dropped.Add(1)
		r.met.dropped[dropQueueFull].Inc()
	}
}

// publishLoop sends the queued decisions and load changes. A load change
// is sent at once (flushAt): a peer that has not heard of a dispatch sees
// its endpoint as idler than it is and sends its own new requests there
// too, so every millisecond of its delay is a window in which the replicas
// herd onto one endpoint. Decisions alone wait out PublishInterval since
// the previous message, batching those queued meanwhile into one message.
// While a message is in flight the changes queued meanwhile wait for it, so
// a busy replica still sends at most one message per round trip.
func (r *Replica) publishLoop() {
	defer r.wg.Done()
	var buf []byte
	var last time.Time
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.q.wake:
		}
		if !r.waitFlush(last) { // let the decisions of the next few milliseconds join this message
			return
		}
		last = r.now()
		buf, _ = r.flush(buf)
	}
}

// flushAt is when the publisher sends what is queued, given the time of its
// previous message (zero: none yet): at once when a load change is queued,
// PublishInterval is not positive or nothing was sent yet, else
// PublishInterval after the previous message. The simulation's manual
// replicas schedule their flushes by it (Manual.FlushAt), so they publish
// as this loop does.
func (r *Replica) flushAt(last time.Time) time.Time {
	r.q.mu.Lock()
	changes := r.dq.n
	r.q.mu.Unlock()
	if changes > 0 || r.cfg.PublishInterval <= 0 || last.IsZero() {
		return r.now()
	}
	return last.Add(r.cfg.PublishInterval)
}

// waitFlush waits on the replica's clock until flushAt(last); false when
// Close came first. One timer covers the whole wait: a wake by another
// queued decision or session leaves it armed, and one by a load change ends
// the wait at once. Re-arming it after every wake would let the clock pass
// the flush time between reading the clock and arming (a manual clock
// advanced just then), and the message would wait one interval more.
func (r *Replica) waitFlush(last time.Time) bool {
	wait := r.flushAt(last).Sub(r.now())
	if wait <= 0 {
		return true
	}
	t := r.clock.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return false
		case <-t.C():
			return true
		case <-r.q.wake:
			if !r.flushAt(last).After(r.now()) {
				return true
			}
		}
	}
}

// sleep waits d on the replica's clock; false when Close came first.
func (r *Replica) sleep(d time.Duration) bool {
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// flush sends the queued decisions and load changes, reusing buf; it
// returns buf and the number of decisions and changes taken. A message
// takes decisions, then load changes, until it reaches flushBytes, and
// never more than maxMessageBytes, the bound its receivers check: a burst
// of changes travels in several messages, sent in order, each numbering
// its first change (the changes' numbers follow one another), so the peers
// apply them all, in order. Validate makes room in a message for a
// decision of MaxKeysPerDecision keys; a decision or change too large for
// a message of its own (an endpoint name of about 1 MiB, which no peer
// would accept anyway) is dropped and counted (too_large).
func (r *Replica) flush(buf []byte) ([]byte, int) {
	batch, deltas := r.q.take(&r.dq)
	taken := len(batch) + len(deltas)
	overhead := messageOverhead(r.cfg.ReplicaID)
	for len(batch) > 0 || len(deltas) > 0 {
		n, m, size := 0, 0, overhead
		fits := func(b int) bool { return size < flushBytes && size+b <= maxMessageBytes }
		for n < len(batch) && fits(decisionWireBytes(len(batch[n].endpoint), len(batch[n].keys))) {
			size += decisionWireBytes(len(batch[n].endpoint), len(batch[n].keys))
			n++
		}
		for n == len(batch) && m < len(deltas) && fits(deltaWireBytes(deltas[m])) {
			size += deltaWireBytes(deltas[m])
			m++
		}
		if n == 0 && m == 0 { // the next one does not fit an empty message
			if len(batch) > 0 {
				batch = batch[1:]
				r.stats.dropped.Add(1)
				r.met.dropped[dropTooLarge].Inc()
			} else {
				deltas = deltas[1:]
				r.met.deltasDropped[deltaDropTooLarge].Inc()
			}
			continue
		}
		buf = appendDecisionHeader(buf[:0], r.cfg.ReplicaID, n)
		for _, s := range batch[:n] {
			buf = appendDecision(buf, s.endpoint, s.keys)
		}
		batch = batch[n:]
		if m > 0 {
			buf = appendDeltas(buf, deltas[0].seq, deltas[:m])
			deltas = deltas[m:]
		}
		r.send(buf, n, m)
	}
	buf = r.flushSessions(buf) // sessions.go
	if cap(buf) > 4*flushBytes {
		buf = nil // release a burst's memory
	}
	return buf, taken
}

func (r *Replica) send(msg []byte, n, m int) {
	if r.Degraded() { // no Redis to publish to: drop at once, counted
		r.stats.dropped.Add(int64(n))
		r.met.dropped[dropRedis].Add(float64(n))
		r.met.deltasDropped[deltaDropRedis].Add(float64(m))
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
	defer cancel()
	err := r.store.Publish(ctx, r.keys.channel, msg)
	r.countCommands(1)
	if err != nil {
		r.stats.dropped.Add(int64(n))
		r.met.dropped[dropRedis].Add(float64(n))
		r.met.deltasDropped[deltaDropRedis].Add(float64(m))
		r.result(opPublish, err)
		return
	}
	r.stats.deltas.Add(int64(m))
	r.met.deltasPublished.Add(float64(m))
	r.stats.published.Add(int64(n))
	r.stats.publishedBytes.Add(int64(len(msg)))
	r.stats.messages.Add(1)
	r.met.published.Add(float64(n))
	r.met.publishedBytes.Add(float64(len(msg)))
	r.met.messages.Inc()
}

// subscribe opens the decision subscription; a failure shows on Receive.
func (r *Replica) subscribe() *redis.PubSub {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
	defer cancel()
	r.countCommands(1)
	if r.cfg.ShardedPubSub {
		return r.rdb.SSubscribe(ctx, r.keys.channel)
	}
	return r.rdb.Subscribe(ctx, r.keys.channel)
}

// receiveLoop applies the peers' decisions as speculative index entries,
// from ps or, when it is nil (New's read failed: New does not wait for a
// third operation on a Redis that does not answer), from a subscription it
// opens first. go-redis reconnects and resubscribes a broken subscription
// on the next receive; the loop waits ReadPeriod between failed attempts.
// A connection that died without closing (a partition, or a failover
// behind a NAT or a service IP: no FIN, no RST) breaks nothing go-redis
// sees, and writing a ping to it succeeds, so on a channel quiet for
// 2 × Lease the loop pings and waits OpTimeout for anything to arrive: if
// nothing does, the connection is taken for dead (counted as a subscribe
// error), closed, and the subscription opened again. So is one that
// delivered a reply of the wrong shape (an empty array, a count that is no
// integer: a broken server or proxy), on which go-redis panics: the panic
// is recovered (receive) rather than let end the process.
func (r *Replica) receiveLoop(ps *redis.PubSub) {
	defer r.wg.Done()
	if ps == nil {
		ps = r.subscribe()
	}
	var psMu sync.Mutex                       // guards ps against the close on Close; the loop alone replaces it
	stop := context.AfterFunc(r.ctx, func() { // interrupts a blocked receive
		psMu.Lock()
		_ = ps.Close()
		psMu.Unlock()
	})
	defer stop()
	defer func() {
		psMu.Lock()
		_ = ps.Close()
		psMu.Unlock()
	}()
	var scratch []kvindex.Key
	selfHeader := string(appendStr([]byte{decisionMagic, wireVersion}, r.cfg.ReplicaID))
	idle := 2 * r.cfg.Lease
	backoff := r.cfg.ReadPeriod
	pinged := false // a ping is out and nothing arrived since
	resubscribe := func() {
		psMu.Lock()
		defer psMu.Unlock()
		_ = ps.Close()
		if r.ctx.Err() == nil {
			ps = r.subscribe()
		}
	}
	for r.ctx.Err() == nil {
		wait := idle
		if pinged {
			wait = r.cfg.OpTimeout
		}
		msg, err := receive(r.ctx, ps, wait)
		if err != nil {
			if r.ctx.Err() != nil {
				return
			}
			if errors.Is(err, errMalformedPush) {
				pinged = false
				r.result(opSubscribe, err)
				if !r.sleep(backoff) { // a server that does it again is not hammered
					return
				}
				backoff = min(2*backoff, max(time.Second, r.cfg.ReadPeriod))
				resubscribe()
				continue
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if pinged { // the ping went unanswered: the connection is dead
					pinged = false
					r.result(opSubscribe, errPingUnanswered)
					resubscribe()
					continue
				}
				// Quiet channel: probe the connection so a dead one is noticed.
				pctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
				err = ps.Ping(pctx)
				cancel()
				r.countCommands(1)
				if err == nil {
					pinged = true
					continue
				}
			}
			pinged = false
			r.result(opSubscribe, err)
			if !r.sleep(backoff) { // retry pacing while Redis is away
				return
			}
			backoff = min(2*backoff, max(time.Second, r.cfg.ReadPeriod))
			continue
		}
		pinged = false // anything received, the pong included, shows the connection alive
		switch m := msg.(type) {
		case *redis.Subscription:
			backoff = r.cfg.ReadPeriod
			r.result(opSubscribe, nil)
		case *redis.Message:
			if strings.HasPrefix(m.Payload, selfHeader) {
				continue // our own message, echoed by the channel: nothing to copy or decode
			}
			scratch = r.apply([]byte(m.Payload), scratch)
		}
	}
}

// receive is ps.ReceiveTimeout, with go-redis's panic on a reply of the
// wrong shape (it indexes and asserts the reply's elements unchecked)
// turned into an error wrapping errMalformedPush.
func receive(ctx context.Context, ps *redis.PubSub, timeout time.Duration) (msg any, err error) {
	defer func() {
		if p := recover(); p != nil {
			msg, err = nil, fmt.Errorf("%w: %v", errMalformedPush, p)
		}
	}()
	return ps.ReceiveTimeout(ctx, timeout)
}

// errMalformedPush is the subscribe error of a subscription reply go-redis
// could not take apart.
var errMalformedPush = errors.New("cluster: malformed reply on the decision subscription; reconnecting")

// errPingUnanswered is the subscribe error of a subscription connection
// that did not answer a ping within OpTimeout.
var errPingUnanswered = errors.New("cluster: the decision subscription did not answer a ping; reconnecting")

// apply decodes one decision message and speculates its decisions. The
// replica's own messages, echoed by the channel, never reach it: the subscriber
// (and Manual.Apply) skip a message headed exactly as this replica heads its
// own. A decision that still names this replica as its sender came in a message
// it did not write that way (a version-1 header, a length not in its shortest
// form: a forged or broken sender); it is dropped and counted (own_sender), as
// is a decision with no keys (no_keys), which Publish never sends. A load
// change under this replica's own ID in such a message is dropped and
// counted the same way (kvroute_cluster_load_changes_dropped_total,
// own_sender).
func (r *Replica) apply(payload []byte, scratch []kvindex.Key) []kvindex.Key {
	if len(payload) > 0 && payload[0] == sessionMagic { // session affinity records (sessions.go)
		r.applySessions(payload)
		return scratch
	}
	self := r.cfg.ReplicaID
	// Peers may be configured with a larger MaxKeysPerDecision: accept up to
	// what a message can hold.
	scratch, err := decodeDecisions(payload, maxMessageBytes/8, scratch, func(sender, endpoint []byte, keys []kvindex.Key) {
		switch {
		case string(sender) == self:
			r.met.dropped[dropOwnSender].Inc()
			return
		case len(keys) == 0:
			r.met.dropped[dropNoKeys].Inc()
			return
		case !r.accepts(endpoint): // counted in endpointsDropped
			return
		}
		r.index.Speculate(string(endpoint), keys, 0) // the index's own speculative TTL
		r.stats.applied.Add(1)
		r.met.received.Inc()
	}, func(sender, endpoint []byte, seq uint64, tokens, requests int64) {
		if string(sender) == self {
			r.met.deltasDropped[deltaDropOwnSender].Inc()
			return
		}
		r.applyDelta(sender, endpoint, seq, tokens, requests)
	})
	if err != nil {
		r.met.invalidMsgs.Inc()
	}
	return scratch
}
