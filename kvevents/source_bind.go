package kvevents

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-zeromq/zmq4"

	"github.com/kvroute/kvroute/internal/clockctx"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// maxConnTopics bounds each bind-mode connection's topic → stream cache
// (an engine uses one topic; the bound only matters for hostile peers).
const maxConnTopics = 64

// maxConnTopicBytes bounds the bytes of the topics that cache holds
// besides the last one cached: a topic may be as large as a frame
// (PoolConfig.MaxFrameSize), and maxConnTopics of them would keep that
// many frames' worth of memory per connection.
const maxConnTopicBytes = 64 << 10

// binder runs bind mode: for each data-parallel rank r of
// PoolConfig.BindRanks, a listener on BindAddress's port + r, to which
// engines connect their PUB (the centralized topology). Each accepted
// connection is read by its own goroutine, so one engine's connection
// ending, or a peer misbehaving, affects nobody else; the listener is
// recreated (with backoff) only when it cannot bind or stops accepting.
// Connections are bounded in number, and so are those of one source address
// (unless BindAnySource), so that one peer holding connections open cannot
// shut the engines out (see admitConn); a refused connection counts as an
// accept error of the bind address.
//
// A message's endpoint comes from its topic, kv@<host:port>@<model>, and
// the rank of the listener it arrived on: rank 0 is the topic's endpoint,
// rank r the endpoint <host>:<port + r> registered with Rank r. Only
// endpoints passed to Ensure are indexed unless BindAnyTopic is set (then at
// most BindMaxStreams streams are created); other messages are counted in
// one unlabelled series (kvroute_kv_events_bind_unknown_total), never in a
// series named after the wire's topic. Remove deletes every series of the
// endpoint (those of its drops as not selected included, when it had no
// stream), and a message resolved before the removal and handled after it
// is resolved again (an unknown topic by then): no series of a removed
// endpoint comes back, however the endpoints churn.
//
// Topics are not authenticated. Two rules keep a peer from taking over
// another engine's stream:
//   - a topic is accepted only on a connection whose source address is the
//     host of the endpoint it names, the pod IP (see
//     PoolConfig.BindAnySource, source_bind_addr.go); other connections'
//     messages for it are refused and counted
//     (kvroute_kv_events_bind_source_mismatch_total), so a peer elsewhere
//     cannot claim it, not even while the engine restarts;
//   - an endpoint's stream belongs to the connection that first delivered
//     one of its messages, until that connection ends: messages for it on
//     any other connection are dropped and counted
//     (kvroute_kv_events_bind_foreign_total), so a second connection from
//     the same address cannot inject blocks into, or clear (with a
//     sequence going back to 0), an endpoint whose engine is connected.
//
// An engine that restarts closes its connection, so its new connection
// takes over; a connection that takes an endpoint over is checked as a
// reconnection is in per-endpoint mode (stream.onConnect: a replay from
// the watermark itself compares the digest, and recovers what was
// published while no connection delivered the endpoint). Liveness is the ZMTP heartbeat (PoolConfig.HeartbeatInterval,
// as in per-endpoint mode): each connection sends PINGs, which libzmq
// answers by itself, and one that receives nothing within HeartbeatTimeout
// of a PING is closed. A frozen or vanished engine (SIGSTOP, a pulled
// cable) therefore loses its connection and its endpoints: they show as
// not connected (EndpointStatus.Connected, state degraded once live), the
// loss counts as a recv error of each endpoint, and the restarted engine
// takes over. With heartbeats off the idle deadline does this instead.
type binder struct {
	p     *Pool
	done  chan struct{}
	bound []atomic.Pointer[string] // bound address per rank
	gen   atomic.Uint64            // bumped by Ensure and Remove: invalidates the caches

	// Guarded by Pool.mu; the streams themselves are in Pool.streams.
	known   map[string]Endpoint      // endpoints passed to Ensure
	closing map[string]chan struct{} // streams being closed

	mu     sync.Mutex
	owners map[*stream]*bindConn
	conns  int
	perSrc map[netip.Addr]int // connections served per source address (see admitConn)
}

// bindConn is one accepted engine connection.
type bindConn struct {
	c      *zmqx.Conn
	rank   int
	from   netip.Addr // the peer's IP address (IPv4 unmapped, no zone)
	cache  map[string]bindEntry
	cbytes int // bytes of the topics in cache
	cgen   uint64
	owned  []*stream
	warned bool // a refused claim of a configured endpoint was logged
}

// bindEntry is the cached resolution of one topic: its stream and model, or
// the reason its messages are dropped (id is then a configured endpoint, or
// "" when the topic names no known endpoint). refused: the connection does
// not come from the endpoint's address.
type bindEntry struct {
	st           *stream
	model        string
	unknownModel bool // the topic names a model the endpoint does not serve (counted per message)
	id           string
	reason       Reason
	refused      bool
}

func newBinder(p *Pool) *binder {
	return &binder{p: p, done: make(chan struct{}), bound: make([]atomic.Pointer[string], p.cfg.BindRanks),
		known: make(map[string]Endpoint), closing: make(map[string]chan struct{}),
		owners: make(map[*stream]*bindConn), perSrc: make(map[netip.Addr]int)}
}

// ensureLocked records the endpoint's settings; its stream is created by
// its first message. A stream whose model or replay address changed, or
// whose labels no longer match, is closed and its entries cleared. pos is
// kept for the stream of a selected endpoint that has none yet, until its
// first message creates it; an endpoint that is not selected keeps none.
func (b *binder) ensureLocked(ep Endpoint, match bool, pos *Position) func() {
	p := b.p
	old := p.streams[ep.ID]
	switch {
	case !match:
		delete(p.resume, ep.ID)
	case pos != nil && old == nil:
		p.resume[ep.ID] = *pos // consumed by the endpoint's next new stream
	}
	b.known[ep.ID] = ep
	if match && old == nil {
		// Before the stream exists: restored entries are matched at the
		// endpoint's engine block size from now on (setBlockSize).
		p.applier.setBlockSize(ep.ID, ep.BlockSize)
	}
	replace := old != nil && (!match || old.cfgModel != ep.Model || !slices.Equal(old.cfgModels, ep.Models) || old.replayAddr != ep.ReplayAddress)
	return func() {
		b.gen.Add(1)
		if replace {
			b.closeStream(old, !match)
		}
	}
}

// removeLocked forgets the endpoint: an engine that keeps publishing is
// indexed again only with BindAnyTopic.
func (b *binder) removeLocked(id string) func() {
	delete(b.known, id)
	delete(b.p.resume, id) // also when no message created its stream yet
	st := b.p.streams[id]
	return func() {
		// Under b.mu: a message resolved under the previous generation is
		// counted before this (and its series deleted below) or resolved
		// again after it (countDrop), never counted under the removed ID.
		b.mu.Lock()
		b.gen.Add(1)
		b.mu.Unlock()
		if st != nil {
			b.closeStream(st, true)
			return
		}
		// No stream: its messages may still have been counted under its
		// ID (not selected).
		b.p.m.forgetEndpoint(id)
	}
}

// close waits for the listeners and their connections to end (the pool's
// context is cancelled).
func (b *binder) close() { <-b.done }

// closeStream closes a stream and clears its entries. Until that is done
// the bind loop waits before creating a new stream for the same endpoint,
// so the old stream's Clear cannot hit the new one's entries.
func (b *binder) closeStream(st *stream, forget bool) {
	p := b.p
	done := make(chan struct{})
	p.mu.Lock()
	if p.streams[st.id] == st {
		delete(p.streams, st.id)
	}
	b.closing[st.id] = done
	p.mu.Unlock()
	p.closeStream(st, true, forget)
	b.release(st)
	p.mu.Lock()
	delete(b.closing, st.id)
	p.mu.Unlock()
	close(done)
}

// release drops a closed stream from the connection that owns it, which
// may stay open for the endpoint's next stream: the binder keeps no
// reference to a closed stream.
func (b *binder) release(st *stream) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bc := b.owners[st]
	if bc == nil {
		return
	}
	delete(b.owners, st)
	if i := slices.Index(bc.owned, st); i >= 0 {
		bc.owned = slices.Delete(bc.owned, i, i+1)
	}
}

// addrs returns the bound address of each rank ("" until bound).
func (b *binder) addrs() []string {
	out := make([]string, len(b.bound))
	for r := range out {
		if a := b.bound[r].Load(); a != nil {
			out[r] = *a
		}
	}
	return out
}

func (b *binder) run() {
	defer close(b.done)
	p := b.p
	p.m.ActiveSubscribers.Inc()
	defer p.m.ActiveSubscribers.Dec()
	var wg sync.WaitGroup
	for r := range p.cfg.BindRanks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.runRank(r)
		}()
	}
	wg.Wait()
}

// runRank keeps the listener of one rank up until the pool closes.
func (b *binder) runRank(rank int) {
	p := b.p
	addr, _ := rankAddress(p.cfg.BindAddress, rank) // validated by NewPool
	backoff := p.cfg.MinBackoff
	for p.ctx.Err() == nil {
		op, err := b.session(rank, addr, func() { backoff = p.cfg.MinBackoff })
		if p.ctx.Err() != nil {
			return
		}
		p.m.ZMQErrors.WithLabelValues(p.cfg.BindAddress, op).Inc()
		p.log.Warn("KV-event bind socket failed; retrying", "address", addr, "rank", rank,
			"operation", op, "err", err, "backoff", backoff)
		if !clockctx.Sleep(p.ctx, p.clock, backoff) {
			return
		}
		backoff = min(2*backoff, p.cfg.MaxBackoff)
	}
}

// session runs one listener until it fails or the pool closes, and waits
// for the connections it accepted.
func (b *binder) session(rank int, addr string, onBound func()) (op string, err error) {
	p := b.p
	sctx, cancel := context.WithCancel(p.ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	zo := p.zopts
	zo.OnHandshakeFailure = func(net.Addr, error) {
		// A connection that never became a ZMTP PUB (a mute or
		// misconfigured peer, a port scan): nothing it sent is read.
		p.m.ZMQErrors.WithLabelValues(p.cfg.BindAddress, "handshake").Inc()
	}
	l, err := zmqx.Listen(sctx, addr, zmq4.Sub, zo, p.log)
	if err != nil {
		return "bind", err
	}
	defer func() { _ = l.Close() }()
	bound := l.Endpoint()
	b.bound[rank].Store(&bound)
	onBound()
	p.log.Info("KV-event socket bound; engines connect to it", "address", bound, "rank", rank)
	for {
		c, err := l.Accept()
		if err != nil {
			return "recv", err
		}
		from := remoteIP(c.RemoteAddr())
		if !b.admitConn(from) {
			_ = c.Close()
			p.m.ZMQErrors.WithLabelValues(p.cfg.BindAddress, "accept").Inc()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer b.releaseConn(from)
			b.serve(sctx, &bindConn{c: c, rank: rank, from: from, cache: make(map[string]bindEntry)})
		}()
	}
}

// serve reads one engine connection until it ends.
func (b *binder) serve(ctx context.Context, bc *bindConn) {
	p := b.p
	stop := context.AfterFunc(ctx, func() { _ = bc.c.Close() })
	defer stop()
	defer func() { _ = bc.c.Close() }()
	var rerr error // why the connection ended, when the pool did not end it
	defer func() { b.disown(bc, rerr) }()
	// A PUB sends only what its peers subscribe to.
	if err := bc.c.WriteMsg(append([]byte{1}, p.cfg.TopicFilter...)); err != nil {
		p.m.ZMQErrors.WithLabelValues(p.cfg.BindAddress, "subscribe").Inc()
		return
	}
	for {
		m, err := bc.c.ReadMsg()
		if err != nil {
			if ctx.Err() == nil {
				// One engine's connection ended (EOF, heartbeat timeout,
				// idle deadline, oversized frame); the others are
				// unaffected. disown counts it.
				rerr = err
			}
			return
		}
		if m.Command {
			continue
		}
		seq, ok := parseLive(m.Frames)
		if !ok {
			p.m.drop(p.cfg.BindAddress, dropMalformed, 1)
			continue
		}
		b.deliver(bc, seq, m.Frames)
	}
}

// deliver counts or hands over one well-formed message. An endpoint
// removed (or changed) since its topic was resolved has it resolved again,
// so nothing is counted under the ID of an endpoint that left the pool:
// its series are gone for good.
func (b *binder) deliver(bc *bindConn, seq uint64, frames [][]byte) {
	p := b.p
	for {
		e := b.resolve(bc, frames[0])
		if h := bindResolvedHook.Load(); h != nil {
			(*h)()
		}
		switch {
		case e.refused:
			p.m.BindSourceMismatch.Inc()
		case e.st == nil && e.id != "":
			// A configured endpoint: its ID is no wire value.
			if !b.countDrop(bc, e) {
				continue
			}
		case e.st == nil:
			p.m.BindUnknown.Inc()
		default:
			owned, took := b.own(e.st, bc)
			if !owned {
				p.m.BindForeign.Inc()
				return
			}
			if took {
				// A new engine connection for the endpoint: checked as a
				// reconnection in per-endpoint mode (replay from the
				// watermark itself, compare the digest), before its
				// first message is sequenced.
				e.st.onConnect(false)
			}
			if !e.st.whileOpen(func() {
				if e.unknownModel {
					p.m.TopicModelUnknown.WithLabelValues(e.st.id).Inc()
				}
				e.st.receiveOpen(seq, frames[1][8:], frames[2], e.model)
			}) {
				continue // closed since: resolved again
			}
		}
		return
	}
}

// countDrop counts a message of a configured endpoint that is not indexed
// under its ID, unless the endpoints changed since bc resolved it (it is
// then resolved again).
func (b *binder) countDrop(bc *bindConn, e bindEntry) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gen.Load() != bc.cgen {
		return false
	}
	b.p.m.drop(e.id, e.reason, 1)
	return true
}

// own makes bc the connection of st unless another live connection owns
// it; owned false means the message must be dropped, took that bc has just
// become st's connection.
func (b *binder) own(st *stream, bc *bindConn) (owned, took bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch o := b.owners[st]; o {
	case bc:
		return true, false
	case nil:
		if st.closed.Load() {
			// Closed since the topic was resolved (and released by
			// closeStream, or about to be): nothing is applied to it,
			// and it is not registered again.
			return true, false
		}
		b.owners[st] = bc
		bc.owned = append(bc.owned, st)
		st.setConnected(true)
		return true, true
	}
	return false, false
}

// disown releases the streams of a connection that ended; err is why it
// ended (nil when the pool closed it). It runs after the connection's last
// receive, so the next owner's receives follow it. The loss of a
// connection that owned endpoints is counted as a recv error of each of
// them (their state shows them disconnected); any other as one of the
// bind address. A quiet connection closed by the idle deadline (heartbeats
// off) counts nothing.
func (b *binder) disown(bc *bindConn, err error) {
	p := b.p
	b.mu.Lock()
	var lost []string
	for _, st := range bc.owned {
		if b.owners[st] == bc {
			delete(b.owners, st)
			st.setConnected(false)
			if !st.closed.Load() {
				lost = append(lost, st.id)
			}
		}
	}
	bc.owned = nil
	b.mu.Unlock()
	if err == nil {
		return
	}
	if isTimeout(err) && !errors.Is(err, zmqx.ErrPeerDead) {
		// The idle deadline (heartbeats off) closed a quiet connection:
		// routine, as in per-endpoint mode; libzmq reconnects.
		p.log.Debug("No KV events within the idle deadline; engine connection closed", "rank", bc.rank,
			"remote", bc.from, "endpoints", lost)
		return
	}
	if len(lost) == 0 {
		p.m.ZMQErrors.WithLabelValues(p.cfg.BindAddress, "recv").Inc()
		p.log.Debug("KV-event connection to the bind socket ended", "rank", bc.rank, "remote", bc.from, "err", err)
		return
	}
	for _, id := range lost {
		p.m.ZMQErrors.WithLabelValues(id, "recv").Inc()
	}
	p.log.Warn("KV-event engine connection to the bind socket lost", "rank", bc.rank, "remote", bc.from,
		"endpoints", lost, "err", err)
}

// resolve maps a topic to its endpoint's stream, through the connection's
// cache.
func (b *binder) resolve(bc *bindConn, topic []byte) bindEntry {
	if g := b.gen.Load(); g != bc.cgen || len(bc.cache) >= maxConnTopics {
		clear(bc.cache)
		bc.cbytes, bc.cgen = 0, g
	}
	if e, ok := bc.cache[string(topic)]; ok && (e.st == nil || !e.st.closed.Load()) {
		return e
	}
	if _, ok := bc.cache[string(topic)]; !ok {
		if bc.cbytes+len(topic) > maxConnTopicBytes {
			clear(bc.cache)
			bc.cbytes = 0
		}
		bc.cbytes += len(topic)
	}
	e := bindEntry{reason: dropUnknownEndpoint}
	id, model, ok := wire.ParseTopic(topic)
	if ok && bc.rank > 0 {
		id, ok = offsetID(id, bc.rank)
	}
	if ok && !b.sourceAllowed(bc, id) {
		e.refused = true
		ok = false
	}
	if ok {
		b.p.topicSeen(id, model)
		var known bool
		e.st, e.reason, known = b.stream(id, bc.rank)
		if known {
			e.id = id
		}
		e.model = model
		if e.st != nil {
			e.model, e.unknownModel = e.st.modelFor(model)
		}
	}
	bc.cache[string(topic)] = e
	return e
}

// bindResolvedHook, when set (by tests), runs after the bind loop resolved
// a message's topic and before it counts or delivers the message: a test
// orders an endpoint's removal between the two.
var bindResolvedHook atomic.Pointer[func()]

// errBindCap is only used in logs: the stream cap of bind mode was reached.
var errBindCap = errors.New("bind-mode stream cap reached")

// stream returns the stream of a bind-mode endpoint seen on the listener
// of rank, creating it on its first message; nil and a drop reason when its
// messages are not indexed. known reports whether id is an endpoint passed
// to Ensure (its ID may then label a drop).
func (b *binder) stream(id string, rank int) (st *stream, reason Reason, known bool) {
	p := b.p
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, dropUnknownEndpoint, false
		}
		ep, known := b.known[id]
		if known && ep.Rank != rank {
			// Another rank's endpoint: its messages arrive on its own
			// listener; never merge two ranks.
			p.mu.Unlock()
			return nil, dropUnknownEndpoint, false
		}
		if st := p.streams[id]; st != nil {
			p.mu.Unlock()
			return st, "", known
		}
		if done := b.closing[id]; done != nil {
			p.mu.Unlock()
			<-done // the old stream's entries are being cleared
			continue
		}
		if !known {
			if !p.cfg.BindAnyTopic || !topicEndpointID(id) || len(p.streams) >= p.cfg.BindMaxStreams {
				full := p.cfg.BindAnyTopic
				p.mu.Unlock()
				if full {
					p.log.Debug("KV-event topic not indexed", "err", errBindCap, "max", p.cfg.BindMaxStreams)
				}
				return nil, dropUnknownEndpoint, false
			}
			ep = Endpoint{ID: id, Rank: rank}
			if host, _, err := net.SplitHostPort(id); err == nil && host != "" && p.cfg.Replay {
				ep.ReplayAddress = "tcp://" + net.JoinHostPort(host, strconv.Itoa(p.cfg.ReplayPort+rank))
			}
		}
		if !p.match(ep.Labels) {
			p.mu.Unlock()
			return nil, dropNotSelected, known
		}
		st := p.newEndpointStreamLocked(ep)
		p.applier.setBlockSize(id, ep.BlockSize)
		p.streams[id] = st
		p.mu.Unlock()
		st.log.Info("KV-event endpoint seen on the bind socket", "rank", rank, "replay", ep.ReplayAddress)
		return st, "", known
	}
}
