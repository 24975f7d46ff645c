package kvevents

import (
	"time"

	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
)

// stream returns the stream of the endpoint with this ID (nil: none).
func (p *Pool) stream(id string) *stream {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streams[id]
}

// subOptions are the transport options of subscription sockets: heartbeats
// on the pool's clock when enabled, else the idle deadline.
func subOptions(cfg PoolConfig, clock telemetry.Clock) zmqx.Options {
	o := zmqx.Options{
		Clock:            clock,
		HandshakeTimeout: cfg.HandshakeTimeout,
		DialTimeout:      cfg.DialTimeout,
		MaxFrameSize:     cfg.MaxFrameSize,
	}
	if cfg.HeartbeatInterval > 0 {
		o.HeartbeatInterval, o.HeartbeatTimeout = cfg.HeartbeatInterval, cfg.HeartbeatTimeout
	} else {
		o.IdleTimeout = cfg.IdleTimeout
	}
	return o
}

// newStreamLocked creates a stream on the least loaded worker.
func (p *Pool) newStreamLocked(id, model, replayAddr string) *stream {
	w := p.workers[0]
	for _, c := range p.workers[1:] {
		if c.streams < w.streams {
			w = c
		}
	}
	w.streams++
	w.setStreams(w.streams)
	st := newStream(p, id, model, replayAddr)
	st.w = w
	return st
}

// closeStream closes st; forget also drops its metric series and the
// Applier's memory of the endpoint (it left the pool). A stream whose
// entries are cleared while the endpoint stays (clearIndex without
// forget) is one a new stream replaces: its dropped messages are counted
// (stream.close).
func (p *Pool) closeStream(st *stream, clearIndex, forget bool) {
	st.close(clearIndex, clearIndex && !forget)
	p.mu.Lock()
	if p.streams[st.id] == st {
		delete(p.streams, st.id)
	}
	st.w.streams--
	st.w.setStreams(st.w.streams)
	p.mu.Unlock()
	if forget {
		p.applier.forget(st.id)
		p.m.forgetEndpoint(st.id)
		p.sm.forget(st.id)
		p.snm.forget(st.id)
		p.rm.forget(st.id)
		p.mu.Lock()
		delete(p.resume, st.id)
		p.mu.Unlock()
	}
}

// replayClient returns a replay client that counts attempt failures for
// the endpoint id.
func (p *Pool) replayClient(id string) *replay.Client {
	cc := p.cfg.ReplayClient
	cc.OnSlotWait = func(d time.Duration) { p.sm.ReplaySlotWait.Observe(d.Seconds()) }
	next := cc.OnAttemptError
	cc.OnAttemptError = func(e *replay.Error) {
		// A replay kvroute gave up (superseded, cut short, the endpoint
		// removed, the pool closing) is not the publisher's error.
		if e.Op != replay.OpApply && !e.Canceled {
			p.m.ZMQErrors.WithLabelValues(id, e.Op).Inc()
		}
		if next != nil {
			next(e)
		}
	}
	c, err := replay.NewClient(cc, replay.Options{Set: telemetry.Set{Logger: p.log, Clock: p.clock}})
	if err != nil {
		// cfg.ReplayClient was validated by NewPool; keep running without replay.
		p.log.Error("Replay client unavailable", "endpoint", id, "err", err)
		return nil
	}
	return c
}
