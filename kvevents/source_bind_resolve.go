package kvevents

import (
	"errors"
	"net"

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
	e := bindEntry{reason: dropUnknownEndpoint, tm: topicMetaOf(topic)}
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
			// The pool's engine kind is the endpoint's, and its replay
			// address is derived as resolve derives one.
			ep = Endpoint{ID: id, Rank: rank, Engine: p.cfg.Engine}
			if host, _, err := net.SplitHostPort(id); err == nil && host != "" {
				ep.ReplayAddress, _ = ep.derivedReplay(&p.cfg, host)
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
