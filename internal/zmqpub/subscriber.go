package zmqpub

import (
	"sync"
	"sync/atomic"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/zmqx"
)

// A subscriber's distinct subscription prefixes are bounded in number and
// in bytes: each one costs memory for the life of the connection and a
// prefix comparison on every Publish, and a peer could otherwise send
// distinct prefixes until the publisher runs out of memory. A SUB of
// kvroute or vLLM holds one or two; a new prefix beyond either bound is
// refused and counted (Stats.Refused), while repeats and cancellations of
// held prefixes are always applied.
//
// Like libzmq's XPUB, a subscriber holds a set of prefixes: a repeated
// subscription changes nothing and one cancellation ends it. A libzmq SUB
// subscribed twice to a prefix sends both subscriptions but only its last
// unsubscription, and a go-zeromq SUB forgets the prefix at its first.
const (
	maxSubscriptions     = 256
	maxSubscriptionBytes = 64 << 10
)

// pubMessage is one published batch, shared (read-only) by every queue.
type pubMessage struct {
	topic   []byte // frame 0: the publisher's topic, or PublishTopic's
	seq     [8]byte
	payload []byte
}

// pubSubscriber is one connected SUB: a bounded queue drained by its writer
// goroutine, and the subscriptions its reader goroutine maintains.
type pubSubscriber struct {
	c    *zmqx.Conn
	q    chan *pubMessage
	done chan struct{}
	once sync.Once

	mu       sync.Mutex
	prefixes map[string]struct{}      // subscription prefixes, a set as in libzmq's XPUB
	bytes    int                      // the bytes of prefixes, at most maxSubscriptionBytes
	topics   atomic.Pointer[[]string] // snapshot of prefixes for Publish
}

func newPubSubscriber(c *zmqx.Conn, queue int) *pubSubscriber {
	s := &pubSubscriber{c: c, q: make(chan *pubMessage, queue), done: make(chan struct{}), prefixes: map[string]struct{}{}}
	s.topics.Store(&[]string{})
	return s
}

// stop closes the connection and wakes the writer; safe to call repeatedly.
func (s *pubSubscriber) stop() {
	s.once.Do(func() {
		close(s.done)
		_ = s.c.Close()
	})
}

// matches reports whether any subscription is a prefix of topic.
func (s *pubSubscriber) matches(topic []byte) bool {
	for _, t := range *s.topics.Load() {
		if len(topic) >= len(t) && string(topic[:len(t)]) == t {
			return true
		}
	}
	return false
}

// subscribe applies one subscription (on) or cancellation. It reports
// false, changing nothing, for a new prefix beyond maxSubscriptions or
// maxSubscriptionBytes.
func (s *pubSubscriber) subscribe(topic []byte, on bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, held := s.prefixes[string(topic)]
	switch {
	case on == held:
		return true // a repeat, or cancelling what is not held: nothing changes
	case on:
		if len(s.prefixes) >= maxSubscriptions || s.bytes+len(topic) > maxSubscriptionBytes {
			return false
		}
		s.prefixes[string(topic)] = struct{}{}
		s.bytes += len(topic)
	default:
		delete(s.prefixes, string(topic))
		s.bytes -= len(topic)
	}
	snap := make([]string, 0, len(s.prefixes))
	for t := range s.prefixes {
		snap = append(snap, t)
	}
	s.topics.Store(&snap)
	return true
}

// readLoop applies subscription messages until the connection ends. SUB
// sockets send "\x01topic" / "\x00topic" messages (ZMTP 3.0) or SUBSCRIBE /
// CANCEL commands (ZMTP 3.1); other commands are ignored (ZMTP lets a peer
// send commands it does not know), and any other message is ignored and
// counted (Stats.Invalid), as is a subscription beyond the bounds
// (Stats.Refused).
func (p *Publisher) readLoop(s *pubSubscriber) {
	defer p.wg.Done()
	defer p.drop(s)
	for {
		m, err := s.c.ReadMsg()
		if err != nil {
			return
		}
		if len(m.Frames) != 1 {
			p.invalid.Add(1)
			continue
		}
		f := m.Frames[0]
		if m.Command {
			switch name, body := commandParts(f); name {
			case zmq4.CmdSubscribe:
				p.subscribe(s, body, true)
			case zmq4.CmdCancel:
				p.subscribe(s, body, false)
			}
			continue
		}
		if len(f) > 0 && (f[0] == 0 || f[0] == 1) {
			p.subscribe(s, f[1:], f[0] == 1)
		} else {
			p.invalid.Add(1)
		}
	}
}

// subscribe applies a subscription message of s, counting a refused one.
func (p *Publisher) subscribe(s *pubSubscriber, topic []byte, on bool) {
	if !s.subscribe(topic, on) {
		p.refused.Add(1)
		p.lg.Debug("subscription refused: the subscriber holds too many", "remote", s.c.RemoteAddr().String(),
			"subscriptions", maxSubscriptions, "bytes", maxSubscriptionBytes)
	}
}

// writeLoop sends queued messages until the subscriber stops.
func (p *Publisher) writeLoop(s *pubSubscriber) {
	defer p.wg.Done()
	defer p.drop(s)
	for {
		select {
		case <-s.done:
			return
		case m := <-s.q:
			if err := s.c.WriteMsg(m.topic, m.seq[:], m.payload); err != nil {
				p.lg.Debug("subscriber write failed", "remote", s.c.RemoteAddr().String(), "err", err)
				return
			}
		}
	}
}

// commandParts splits a ZMTP command frame into its name and body.
func commandParts(f []byte) (string, []byte) {
	if len(f) == 0 || int(f[0]) > len(f)-1 {
		return "", nil
	}
	return string(f[1 : 1+int(f[0])]), f[1+int(f[0]):]
}

// HasSubscription reports whether a connected subscriber holds a subscription
// equal to prefix; tests wait for it to leave the slow-joiner window behind.
func (p *Publisher) HasSubscription(prefix string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.subs {
		for _, t := range *s.topics.Load() {
			if t == prefix {
				return true
			}
		}
	}
	return false
}
