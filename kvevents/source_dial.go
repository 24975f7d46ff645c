package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvroute/kvroute/internal/zmqx"
)

// subscriber supervises the SUB socket of one endpoint (per-endpoint mode):
// one socket per publisher, dialled with no go-zeromq retries or
// auto-reconnect, recreated after any receive error (EOF, heartbeat
// timeout, idle deadline, oversized frame, cancellation), closed and
// drained every time, with its own backoff. ZMTP commands are skipped and
// malformed messages counted. Sequencing is the stream's job.
//
// Liveness comes from ZMTP heartbeats (PoolConfig.HeartbeatInterval): a
// quiet engine answers PINGs and its connection is kept however long it
// publishes nothing, while a frozen or partitioned one fails its connection
// within HeartbeatTimeout (counted as a recv error). With heartbeats
// disabled the idle deadline recycles quiet sockets instead; such a
// recycle is routine, so it counts no error and no reconnection and logs
// at debug level.
//
// Backoff starts at MinBackoff and doubles to MaxBackoff; it is reset only
// by a session that delivered a valid message (or ended as a quiet
// recycle), so a peer that completes the handshake and then misbehaves
// cannot make the subscriber reconnect in a tight loop. Warnings about a
// failing subscription are logged once per failure streak and then at most
// once per failLogInterval, with the number of suppressed failures.
type subscriber struct {
	p      *Pool
	ep     Endpoint
	st     *stream
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	topic      []byte // last topic seen, and its parsed model
	topicModel string
}

// failLogInterval rate-limits the subscriber's failure logs.
const failLogInterval = 30 * time.Second

// sessionResult is how one socket session ended.
type sessionResult struct {
	op        string // failing operation: connect, subscribe, recv
	err       error
	connected bool // the dial succeeded
	delivered int  // valid messages received
}

func (sub *subscriber) run() {
	defer close(sub.done)
	p, st := sub.p, sub.st
	backoff := p.cfg.MinBackoff
	everConnected, failing := false, false
	var lastWarn time.Time
	suppressed := 0
	quietPrev := false // the previous session ended as a quiet recycle
	for sub.ctx.Err() == nil {
		r := sub.session(func() {
			if everConnected && !quietPrev {
				p.m.Reconnections.WithLabelValues(st.id).Inc()
			}
			if !everConnected {
				st.log.Info("Subscribed to KV events", "address", sub.ep.EventsAddress)
			}
			st.onConnect(quietPrev)
			everConnected = true
		})
		if sub.ctx.Err() != nil {
			return
		}
		quiet := r.connected && isTimeout(r.err) && !errors.Is(r.err, zmqx.ErrPeerDead)
		quietPrev = quiet
		if r.delivered > 0 || quiet {
			backoff = p.cfg.MinBackoff
			if failing && r.delivered > 0 {
				st.log.Info("KV-event subscription healthy again", "address", sub.ep.EventsAddress,
					"suppressed_failures", suppressed)
				failing, suppressed = false, 0
			}
		}
		if quiet {
			// A quiet engine, heartbeats off: recycle at once, count nothing.
			st.log.Debug("No KV events within the idle deadline; recreating the socket", "err", r.err)
			continue
		}
		p.m.ZMQErrors.WithLabelValues(st.id, r.op).Inc()
		switch now := time.Now(); {
		case !failing || now.Sub(lastWarn) >= failLogInterval:
			st.log.Warn("KV-event subscription failed; reconnecting", "operation", r.op,
				"address", sub.ep.EventsAddress, "err", r.err, "backoff", backoff,
				"suppressed_failures", suppressed)
			failing, lastWarn, suppressed = true, now, 0
		default:
			suppressed++
			st.log.Debug("KV-event subscription still failing", "operation", r.op, "err", r.err, "backoff", backoff)
		}
		if !sleepCtx(sub.ctx, backoff) {
			return
		}
		backoff = min(2*backoff, p.cfg.MaxBackoff)
	}
}

// session runs one socket from creation to its first error.
func (sub *subscriber) session(onConnect func()) (r sessionResult) {
	p, st := sub.p, sub.st
	sctx, cancel := context.WithCancel(sub.ctx)
	defer cancel()
	s := zmqx.NewSub(sctx, p.zopts, st.log)
	defer func() { _ = zmqx.CloseDrain(s) }()
	if err := s.SetOption(zmq4.OptionSubscribe, p.cfg.TopicFilter); err != nil {
		return sessionResult{op: "subscribe", err: err}
	}
	if err := zmqx.Dial(s, sub.ep.EventsAddress); err != nil {
		return sessionResult{op: "connect", err: err}
	}
	onConnect()
	st.setConnected(true)
	defer st.setConnected(false)
	r.connected = true
	for {
		m, _, err := zmqx.Recv(s)
		if err != nil {
			r.op, r.err = "recv", err
			return r
		}
		seq, ok := parseLive(m.Frames)
		if !ok {
			p.m.drop(st.id, DropMalformed, 1)
			continue
		}
		r.delivered++
		st.receive(seq, m.Frames[2], sub.model(m.Frames[0]))
	}
}

// model returns the model of a message: the endpoint's, else the topic's
// (parsed only when the topic changes, which is also when the pool's
// TopicObserver hears of it).
func (sub *subscriber) model(topic []byte) string {
	if sub.topic == nil || !bytes.Equal(topic, sub.topic) {
		_, sub.topicModel, _ = parseTopic(topic)
		sub.topic = append(sub.topic[:0:0], topic...)
		sub.p.topicSeen(sub.ep.ID, sub.topicModel)
	}
	if sub.ep.Model != "" {
		return sub.ep.Model
	}
	return sub.topicModel
}

// parseLive validates the [topic, seq8, payload] framing of a live message.
func parseLive(frames [][]byte) (seq uint64, ok bool) {
	if len(frames) != 3 || len(frames[1]) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(frames[1]), true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sleepCtx waits d or until ctx ends; false means ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
