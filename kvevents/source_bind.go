package kvevents

import (
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kvroute/kvroute/internal/zmqx"
)

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
	tm           topicMeta
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
