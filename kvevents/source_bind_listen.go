package kvevents

import (
	"context"
	"net"
	"sync"

	"github.com/go-zeromq/zmq4"

	"github.com/kvroute/kvroute/internal/clockctx"
	"github.com/kvroute/kvroute/internal/zmqx"
)

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
