package kvevents

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/go-zeromq/zmq4"

	"github.com/kvroute/kvroute/internal/zmqx"
)

// maxBindErrors is how many receive errors in a row, with no message in
// between, make the bind loop recreate its socket.
const maxBindErrors = 1000

// maxTopicCache bounds the bind loop's topic → stream cache.
const maxTopicCache = 4096

// binder runs the bind-mode socket: one SUB bound on
// PoolConfig.BindAddress, to which engines connect their PUB (the
// centralized topology of spec/zmq.md §11). libzmq engines reconnect by
// themselves, so a receive error only ends one engine's connection and the
// socket carries on; the socket is recreated (with backoff) only when it
// cannot bind or keeps failing. Each message's endpoint comes from its
// topic, kv@<ip:port>@<model>; each endpoint gets its own stream, created
// on its first message.
type binder struct {
	p     *Pool
	done  chan struct{}
	addr  atomic.Pointer[string]
	gen   atomic.Uint64 // bumped by Ensure and Remove: invalidates the cache
	cache map[string]bindEntry
	cgen  uint64
}

// bindEntry is the cached resolution of one topic: its stream and model, or
// the reason its messages are dropped.
type bindEntry struct {
	st     *stream
	model  string
	id     string
	reason string
}

func newBinder(p *Pool) *binder {
	return &binder{p: p, done: make(chan struct{}), cache: make(map[string]bindEntry)}
}

func (b *binder) run() {
	defer close(b.done)
	p := b.p
	p.m.ActiveSubscribers.Inc()
	defer p.m.ActiveSubscribers.Dec()
	backoff := p.cfg.MinBackoff
	for p.ctx.Err() == nil {
		op, err := b.session(func() { backoff = p.cfg.MinBackoff })
		if p.ctx.Err() != nil {
			return
		}
		p.m.ZMQErrors.WithLabelValues(p.cfg.BindAddress, op).Inc()
		p.log.Warn("KV-event bind socket failed; retrying", "address", p.cfg.BindAddress,
			"operation", op, "err", err, "backoff", backoff)
		if !sleepCtx(p.ctx, backoff) {
			return
		}
		backoff = min(2*backoff, p.cfg.MaxBackoff)
	}
}

func (b *binder) session(onBound func()) (op string, err error) {
	p := b.p
	sctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	s := zmqx.NewSub(sctx, p.zopts, p.log)
	defer func() { _ = zmqx.CloseDrain(s) }()
	if err := s.SetOption(zmq4.OptionSubscribe, p.cfg.TopicFilter); err != nil {
		return "subscribe", err
	}
	if err := zmqx.ListenSocket(s, p.cfg.BindAddress); err != nil {
		return "bind", err
	}
	addr := "tcp://" + s.Addr().String()
	b.addr.Store(&addr)
	onBound()
	p.log.Info("KV-event socket bound; engines connect to it", "address", addr)
	errs := 0
	for {
		m, _, err := zmqx.Recv(s)
		if err != nil {
			if sctx.Err() != nil {
				return "recv", err
			}
			// One engine's connection ended (EOF, idle deadline, oversized
			// frame); the others are unaffected.
			p.m.ZMQErrors.WithLabelValues(p.cfg.BindAddress, "recv").Inc()
			p.log.Debug("KV-event connection to the bind socket ended", "err", err)
			if errs++; errs >= maxBindErrors {
				return "recv", err
			}
			continue
		}
		errs = 0
		seq, ok := parseLive(m.Frames)
		if !ok {
			p.m.Drop(p.cfg.BindAddress, DropMalformed, 1)
			continue
		}
		e := b.resolve(m.Frames[0])
		if e.st == nil {
			p.m.Drop(e.id, e.reason, 1)
			continue
		}
		e.st.receive(seq, m.Frames[2], e.model)
	}
}

// resolve maps a topic to its endpoint's stream, through the cache.
func (b *binder) resolve(topic []byte) bindEntry {
	if g := b.gen.Load(); g != b.cgen || len(b.cache) >= maxTopicCache {
		clear(b.cache)
		b.cgen = g
	}
	if e, ok := b.cache[string(topic)]; ok && (e.st == nil || !e.st.closed.Load()) {
		return e
	}
	id, model, ok := ParseTopic(topic)
	e := bindEntry{id: id, model: model, reason: DropUnknownEndpoint}
	if !ok {
		e.id = b.p.cfg.BindAddress
	} else {
		b.p.topicSeen(id, model)
		e.st, e.reason = b.p.bindStream(id)
		if e.st != nil && e.st.cfgModel != "" {
			e.model = e.st.cfgModel
		}
	}
	b.cache[string(topic)] = e
	return e
}

// bindStream returns the stream of a bind-mode endpoint, creating it on its
// first message; nil and a drop reason when its messages are not indexed.
func (p *Pool) bindStream(id string) (*stream, string) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, DropUnknownEndpoint
		}
		if st := p.bound[id]; st != nil {
			p.mu.Unlock()
			return st, ""
		}
		if done := p.closing[id]; done != nil {
			p.mu.Unlock()
			<-done // the old stream's entries are being cleared
			continue
		}
		ep, known := p.known[id]
		if !known {
			if p.cfg.BindKnownOnly {
				p.mu.Unlock()
				return nil, DropUnknownEndpoint
			}
			ep = Endpoint{ID: id}
			if host, _, err := net.SplitHostPort(id); err == nil && host != "" && p.cfg.Replay {
				ep.ReplayAddress = "tcp://" + net.JoinHostPort(host, strconv.Itoa(p.cfg.ReplayPort))
			}
		}
		if !p.sel.Matches(ep.Labels) {
			p.mu.Unlock()
			return nil, DropNotSelected
		}
		st := p.newStreamLocked(id, ep.Model, ep.ReplayAddress)
		p.bound[id] = st
		p.mu.Unlock()
		st.log.Info("KV-event endpoint seen on the bind socket", "replay", ep.ReplayAddress)
		return st, ""
	}
}
