package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/clockctx"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// dialer is the per-endpoint source: every endpoint passed to Ensure (and
// matching Options.Matcher) gets its own subscriber.
type dialer struct {
	p    *Pool
	subs map[string]*subscriber // by endpoint ID; guarded by Pool.mu
}

// ensureLocked keeps the subscriber of an unchanged endpoint (recording
// its labels) and replaces one whose events address, replay address or
// model changed; the replaced stream's entries are cleared. pos is kept
// only for the stream of an endpoint that had none: a kept stream has its
// own position, and a replacing one starts on entries that are cleared.
func (d *dialer) ensureLocked(ep Endpoint, match bool, pos *Position) func() {
	p := d.p
	old := d.subs[ep.ID]
	if old != nil && match && old.ep.sameStream(ep) {
		old.ep.Labels = ep.Labels
		return func() {}
	}
	if old != nil {
		delete(d.subs, ep.ID)
		delete(p.streams, ep.ID)
	}
	delete(p.resume, ep.ID) // nothing left from another call is adopted
	var sub *subscriber
	if match {
		if pos != nil && old == nil {
			p.resume[ep.ID] = *pos // consumed by the stream created next
		}
		sub = d.newSubscriberLocked(ep)
		d.subs[ep.ID] = sub
		p.streams[ep.ID] = sub.st
	}
	return func() {
		if old != nil {
			// A replaced endpoint's entries came from the old address or model.
			d.stop(old, true, !match)
		}
		if sub != nil {
			go sub.run()
			sub.st.log.Debug("Endpoint ensured", "events", ep.EventsAddress, "replay", ep.ReplayAddress)
		}
	}
}

func (d *dialer) removeLocked(id string) func() {
	sub := d.subs[id]
	delete(d.subs, id)
	delete(d.p.resume, id)
	return func() {
		if sub != nil {
			d.stop(sub, true, true)
		}
	}
}

func (d *dialer) close() {
	d.p.mu.Lock()
	subs := make([]*subscriber, 0, len(d.subs))
	for _, s := range d.subs {
		subs = append(subs, s)
	}
	clear(d.subs)
	d.p.mu.Unlock()
	for _, s := range subs {
		s.cancel()
		<-s.done
		d.p.m.ActiveSubscribers.Dec()
	}
}

func (d *dialer) addrs() []string { return nil }

// newSubscriberLocked creates the subscriber of ep (counted as active from
// now until stop); the caller starts its run loop.
func (d *dialer) newSubscriberLocked(ep Endpoint) *subscriber {
	p := d.p
	p.m.ActiveSubscribers.Inc()
	ctx, cancel := context.WithCancel(p.ctx)
	p.applier.setBlockSize(ep.ID, ep.BlockSize)
	return &subscriber{p: p, ep: ep, st: p.newEndpointStreamLocked(ep),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// stop stops sub's socket loop and its stream.
func (d *dialer) stop(sub *subscriber, clearIndex, forget bool) {
	sub.cancel()
	<-sub.done
	d.p.m.ActiveSubscribers.Dec()
	d.p.closeStream(sub.st, clearIndex, forget)
}

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
// recycle is routine, so it counts no error and no reconnection, logs at
// debug level, and keeps the endpoint's readiness state (stream.recycle;
// the check after it is a quiet one).
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

	topic      []byte // last topic seen, its parsed model, and the model its messages are indexed under
	topicModel string
	indexModel string
	unknown    prometheus.Counter // counts the messages of a topic naming an unserved model; nil otherwise
	tm         topicMeta          // the SGLang epoch and barrier the last topic told
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
		quiet := r.connected && isTimeout(r.err) && !errors.Is(r.err, zmqx.ErrPeerDead)
		if quiet && sub.ctx.Err() == nil {
			st.recycle() // routine: readiness waits for the next dial
		} else {
			st.setConnected(false)
		}
		if sub.ctx.Err() != nil {
			return
		}
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
		switch now := p.clock.Now(); {
		case !failing || now.Sub(lastWarn) >= failLogInterval:
			st.log.Warn("KV-event subscription failed; reconnecting", "operation", r.op,
				"address", sub.ep.EventsAddress, "err", r.err, "backoff", backoff,
				"suppressed_failures", suppressed)
			failing, lastWarn, suppressed = true, now, 0
		default:
			suppressed++
			st.log.Debug("KV-event subscription still failing", "operation", r.op, "err", r.err, "backoff", backoff)
		}
		if !clockctx.Sleep(sub.ctx, p.clock, backoff) {
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
	st.setConnected(true) // the supervisor records the end (run)
	r.connected = true
	for {
		m, _, err := zmqx.Recv(s)
		if err != nil {
			r.op, r.err = "recv", err
			return r
		}
		seq, ok := parseLive(m.Frames)
		if !ok {
			p.m.drop(st.id, dropMalformed, 1)
			continue
		}
		r.delivered++
		model := sub.model(m.Frames[0]) // also sub.tm, the topic's
		st.receiveFrame(seq, m.Frames[1][8:], sub.tm, m.Frames[2], model)
	}
}

// model returns the model of a message (stream.modelFor of its topic's
// model; parsed only when the topic changes, which is also when the pool's
// TopicObserver hears of it, and when sub.tm is read from it), and counts a
// topic naming an unserved model.
func (sub *subscriber) model(topic []byte) string {
	if sub.topic == nil || !bytes.Equal(topic, sub.topic) {
		_, sub.topicModel, _ = wire.ParseTopic(topic)
		sub.tm = topicMetaOf(topic)
		sub.topic = append(sub.topic[:0:0], topic...)
		sub.p.topicSeen(sub.ep.ID, sub.topicModel)
		var unknown bool
		sub.indexModel, unknown = sub.st.modelFor(sub.topicModel)
		sub.unknown = nil
		if unknown && sub.p.m != nil {
			sub.unknown = sub.p.m.TopicModelUnknown.WithLabelValues(sub.ep.ID)
		}
	}
	if sub.unknown != nil {
		sub.unknown.Inc()
	}
	return sub.indexModel
}

// parseLive validates the [topic, seq8, payload] framing of a live message.
// The sequence frame may also be 24 bytes: an earlier draft of vLLM's
// snapshot work appended the 16-byte publisher identity to the sequence
// (frame[1][8:], read by stream.observePublisher).
func parseLive(frames [][]byte) (seq uint64, ok bool) {
	if len(frames) != 3 || (len(frames[1]) != 8 && len(frames[1]) != 24) {
		return 0, false
	}
	return binary.BigEndian.Uint64(frames[1]), true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
