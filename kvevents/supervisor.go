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

// subscriber supervises the SUB socket of one endpoint (per-endpoint mode),
// following spec/zmq.md §8: one socket per publisher, dialled with no
// go-zeromq retries or auto-reconnect, recreated after any receive error
// (EOF, idle deadline, oversized frame, cancellation), closed and drained
// every time, with its own backoff: MinBackoff doubling to MaxBackoff,
// reset by a successful connection. ZMTP commands are skipped and malformed
// messages counted. Sequencing is the stream's job.
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

func (sub *subscriber) run() {
	defer close(sub.done)
	p, st := sub.p, sub.st
	backoff := p.cfg.MinBackoff
	everConnected, failing := false, false
	for sub.ctx.Err() == nil {
		op, err, connected := sub.session(func() {
			if everConnected {
				p.m.Reconnections.WithLabelValues(st.id).Inc()
			}
			if !everConnected || failing {
				st.log.Info("Subscribed to KV events", "address", sub.ep.EventsAddress, "reconnect", everConnected)
			}
			everConnected, failing = true, false
			backoff = p.cfg.MinBackoff
			st.onConnect()
		})
		if sub.ctx.Err() != nil {
			return
		}
		p.m.ZMQErrors.WithLabelValues(st.id, op).Inc()
		switch {
		case connected && isTimeout(err):
			st.log.Debug("No KV events within the idle deadline; recreating the socket", "err", err)
		case !failing:
			st.log.Warn("KV-event subscription failed; reconnecting", "operation", op,
				"address", sub.ep.EventsAddress, "err", err, "backoff", backoff)
			failing = true
		default:
			st.log.Debug("KV-event subscription still failing", "operation", op, "err", err, "backoff", backoff)
		}
		if !sleepCtx(sub.ctx, backoff) {
			return
		}
		backoff = min(2*backoff, p.cfg.MaxBackoff)
	}
}

// session runs one socket from creation to its first error. connected
// reports whether the dial succeeded (onConnect was called).
func (sub *subscriber) session(onConnect func()) (op string, err error, connected bool) {
	p, st := sub.p, sub.st
	sctx, cancel := context.WithCancel(sub.ctx)
	defer cancel()
	s := zmqx.NewSub(sctx, p.zopts, st.log)
	defer func() { _ = zmqx.CloseDrain(s) }()
	if err := s.SetOption(zmq4.OptionSubscribe, p.cfg.TopicFilter); err != nil {
		return "subscribe", err, false
	}
	if err := zmqx.Dial(s, sub.ep.EventsAddress); err != nil {
		return "connect", err, false
	}
	onConnect()
	st.connected.Store(true)
	defer st.connected.Store(false)
	for {
		m, _, err := zmqx.Recv(s)
		if err != nil {
			return "recv", err, true
		}
		seq, ok := parseLive(m.Frames)
		if !ok {
			p.m.Drop(st.id, DropMalformed, 1)
			continue
		}
		st.receive(seq, m.Frames[2], sub.model(m.Frames[0]))
	}
}

// model returns the model of a message: the endpoint's, else the topic's
// (parsed only when the topic changes, which is also when the pool's
// TopicObserver hears of it).
func (sub *subscriber) model(topic []byte) string {
	if sub.topic == nil || !bytes.Equal(topic, sub.topic) {
		_, sub.topicModel, _ = ParseTopic(topic)
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
