package zmqpub

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
)

// Defaults of a Publisher.
const (
	DefaultAddr      = "tcp://*:5556"
	DefaultSendQueue = 1000
	DefaultMaxSubs   = 256
	DefaultWriteWait = 5 * time.Second
)

// Upper bounds of the sizes a Publisher allocates by: the replay ring
// (BufferSize entries of 56 bytes, allocated by New) and each subscriber's
// queue (SendQueue slots of 8 bytes, allocated when it connects), so that a
// setting meant as bytes, or a typo, is an error rather than gigabytes taken
// (or a panic, in New or in a connecting subscriber's goroutine).
const (
	// MaxBufferSize bounds Config.BufferSize.
	MaxBufferSize = 1 << 22
	// MaxSendQueue bounds Config.SendQueue.
	MaxSendQueue = 1 << 20
)

// Errors of Publish.
var (
	// ErrClosed is returned by Publish after Close.
	ErrClosed = errors.New("kvevents: publisher closed")
	// ErrEmptyPayload is returned for an empty payload, which a replay
	// client would take for the END sentinel.
	ErrEmptyPayload = errors.New("kvevents: empty payload")
)

// Config configures a Publisher (the fields of kvevents/publish.Config
// but the wire format, which is the caller's business). The zero value binds
// DefaultAddr with the empty topic and serves no replays.
type Config struct {
	Addr             string        // PUB bind address
	Endpoint, Model  string        // topic kv@<Endpoint>@<Model> when Endpoint is set
	Topic            string        // the topic verbatim when Endpoint is empty
	ReplayAddr       string        // replay ROUTER bind address; "" serves none
	ReplayLayout     replay.Layout // reply layout of the replay server
	ReplaySendHWM    int           // replay replies queued per client, beyond which they are dropped like vLLM's ROUTER does (0: none dropped)
	BufferSize       int           // batches the replay ring keeps (default 10,000, at most MaxBufferSize)
	SendQueue        int           // messages queued per subscriber (default 1000, at most MaxSendQueue)
	MaxSubscribers   int           // connected subscribers (default 256)
	WriteTimeout     time.Duration // a subscriber accepting nothing this long is dropped (default 5 s)
	HandshakeTimeout time.Duration // bounds each ZMTP handshake (default 1 s)
	// ReplayIdleTimeout closes a replay client connection that sends
	// nothing this long (0: replay.DefaultServerIdleTimeout).
	ReplayIdleTimeout time.Duration
}

// Validate reports invalid settings.
func (c Config) Validate() error {
	switch {
	case c.BufferSize < 0:
		return fmt.Errorf("kvevents: publisher bufferSize must not be negative, got %d", c.BufferSize)
	case c.SendQueue < 0:
		return fmt.Errorf("kvevents: publisher sendQueue must not be negative, got %d", c.SendQueue)
	case c.MaxSubscribers < 0:
		return fmt.Errorf("kvevents: publisher maxSubscribers must not be negative, got %d", c.MaxSubscribers)
	case c.WriteTimeout < 0:
		return fmt.Errorf("kvevents: publisher writeTimeout must not be negative, got %v", c.WriteTimeout)
	case c.HandshakeTimeout < 0:
		return fmt.Errorf("kvevents: publisher handshakeTimeout must not be negative, got %v", c.HandshakeTimeout)
	case c.ReplaySendHWM < 0:
		return fmt.Errorf("kvevents: publisher replaySendHWM must not be negative, got %d", c.ReplaySendHWM)
	case c.ReplayIdleTimeout < 0:
		return fmt.Errorf("kvevents: publisher replayIdleTimeout must not be negative, got %v", c.ReplayIdleTimeout)
	case c.BufferSize > MaxBufferSize:
		return fmt.Errorf("kvevents: publisher bufferSize %d must be at most %d: the replay ring is allocated up front", c.BufferSize, MaxBufferSize)
	case c.SendQueue > MaxSendQueue:
		return fmt.Errorf("kvevents: publisher sendQueue %d must be at most %d: each subscriber's queue is allocated when it connects", c.SendQueue, MaxSendQueue)
	}
	if err := (replay.ServerConfig{SendHWM: c.ReplaySendHWM}).Validate(); err != nil {
		return fmt.Errorf("kvevents: publisher replaySendHWM: %w", err)
	}
	return c.ReplayLayout.Validate()
}

// Options are a Publisher's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the observability bundle (registerer, logger, tracer
	// provider, clock; see package telemetry):
	//   Registerer receives the kvroute_publisher_* and replay-server metrics;
	//   nil registers none.
	//   Logger receives connection events at debug level; nil discards.
	telemetry.Set
}

// Stats counts what a Publisher did.
type Stats struct {
	Published   uint64 // batches published (sequence numbers used)
	Queued      uint64 // messages queued to subscribers (one per matching subscriber)
	Dropped     uint64 // messages dropped on a full subscriber queue
	Rejected    uint64 // subscriber connections closed at once because MaxSubscribers were connected
	Handshakes  uint64 // connections dropped because their ZMTP handshake failed
	Invalid     uint64 // messages from subscribers ignored because they were no subscription
	Refused     uint64 // subscriptions refused because their subscriber held too many prefixes or prefix bytes
	Subscribers int    // connected subscribers
	// Subscribed counts the connected subscribers whose subscription
	// matches this publisher's topic: the ones a Publish reaches now. A
	// subscriber that has connected but whose SUBSCRIBE has not arrived
	// yet misses what is published meanwhile (ZeroMQ's slow joiner), so
	// wait on this count, not Subscribers, before a first Publish.
	Subscribed int
}

// Publisher is a KV-event publisher for Go engines and tests: a PUB socket
// sending [topic, seq as 8 bytes big-endian, payload] with sequences from 0,
// plus an optional replay server answering [seq] requests from its buffer,
// like vLLM's ZmqEventPublisher.
//
// It does not use go-zeromq's PUB socket, whose queue is unbounded (v0.17.0)
// and whose writer goroutine Close never stops. Each subscriber connection
// gets a bounded queue and a writer goroutine instead, so memory is bounded by
// MaxSubscribers × SendQueue messages plus the replay buffer, and Close stops
// every goroutine. Subscriptions are honoured (prefix match on the topic, in
// both the ZMTP 3.0 message form and the 3.1 SUBSCRIBE/CANCEL commands), up
// to 256 distinct prefixes and 64 KiB of them per subscriber; further ones are
// refused and counted (Stats.Refused).
//
// Ownership: New starts the accept loop, which admits at most
// MaxSubscribers connections and starts two goroutines for each: the
// reader alone reads the connection and maintains the subscriber's
// prefixes (under the subscriber's own mu, published to Publish as an
// atomic snapshot), and the writer alone writes it, draining the
// subscriber's queue. Publish fills the queues under mu, which also guards
// next, subs and closed; when either goroutine of a subscriber ends it
// stops the subscriber (closing its connection, which ends the other) and
// removes it from subs. Close sets closed, stops every subscriber, closes
// the listener (ending the accept loop) and waits for all these goroutines
// through wg before it closes the replay server, whose goroutines are its
// own. The counters are atomics; the other fields are set by New and not
// written after.
type Publisher struct {
	cfg   Config
	topic []byte
	lg    *slog.Logger
	l     *zmqx.Listener
	buf   *replay.Buffer
	rsrv  *replay.Server

	mu     sync.Mutex // orders sequence numbers and fan-out
	next   uint64
	subs   map[*pubSubscriber]struct{}
	closed bool

	wg                                                                 sync.WaitGroup
	published, queued, dropped, rejected, handshakes, invalid, refused atomic.Uint64
	nsubs                                                              atomic.Int64

	set        telemetry.Set          // of the metrics, unregistered by Close
	collectors []prometheus.Collector // what New registered
}

// New binds the PUB socket (and the replay socket when configured) and
// starts accepting subscribers.
func New(cfg Config, opts Options) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.SendQueue == 0 {
		cfg.SendQueue = DefaultSendQueue
	}
	if cfg.MaxSubscribers == 0 {
		cfg.MaxSubscribers = DefaultMaxSubs
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteWait
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{cfg: cfg, lg: lg, subs: make(map[*pubSubscriber]struct{})}
	if cfg.Endpoint != "" {
		p.topic = wire.AppendTopic(nil, cfg.Endpoint, cfg.Model)
	} else {
		p.topic = []byte(cfg.Topic)
	}
	if err := p.register(opts.Set); err != nil {
		return nil, err
	}
	if cfg.ReplayAddr != "" {
		p.buf = replay.NewBuffer(cfg.BufferSize)
		srv, err := replay.NewServer(replay.ServerConfig{
			Addr: cfg.ReplayAddr, Layout: cfg.ReplayLayout, HandshakeTimeout: cfg.HandshakeTimeout,
			SendHWM: cfg.ReplaySendHWM, IdleTimeout: cfg.ReplayIdleTimeout,
		}, p.buf, replay.Options{Set: telemetry.Set{Registerer: opts.Registerer, Logger: lg, Clock: opts.Clock}})
		if err != nil {
			p.set.Unregister(p.collectors...)
			return nil, err
		}
		p.rsrv = srv
	}
	l, err := zmqx.Listen(context.Background(), cfg.Addr, zmq4.Pub, zmqx.Options{
		HandshakeTimeout:   cfg.HandshakeTimeout,
		WriteTimeout:       cfg.WriteTimeout,
		MaxFrameSize:       64 << 10, // subscriptions are small
		Clock:              opts.Clk(),
		OnHandshakeFailure: func(net.Addr, error) { p.handshakes.Add(1) },
	}, lg)
	if err != nil {
		if p.rsrv != nil {
			_ = p.rsrv.Close()
		}
		p.set.Unregister(p.collectors...)
		return nil, fmt.Errorf("kvevents: publisher: %w", err)
	}
	p.l = l
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// register registers the publisher's metrics through set, all or none, and
// remembers them for Close.
func (p *Publisher) register(set telemetry.Set) error {
	if set.Registerer == nil {
		return nil
	}
	fn := func(name, help string, f func() float64, gauge bool) prometheus.Collector {
		if gauge {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
		}
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	cs := []prometheus.Collector{
		fn("kvroute_publisher_batches_total", "KV-event batches published.",
			func() float64 { return float64(p.published.Load()) }, false),
		fn("kvroute_publisher_dropped_total", "Messages dropped because a subscriber's queue was full.",
			func() float64 { return float64(p.dropped.Load()) }, false),
		fn("kvroute_publisher_rejected_subscribers_total", "Subscriber connections closed at once because the subscriber limit was reached.",
			func() float64 { return float64(p.rejected.Load()) }, false),
		fn("kvroute_publisher_handshake_failures_total", "Connections dropped because their ZMTP handshake failed (not a SUB, a bad greeting, a mute peer).",
			func() float64 { return float64(p.handshakes.Load()) }, false),
		fn("kvroute_publisher_invalid_messages_total", "Messages from subscribers ignored because they were no subscription (several frames, or a first byte other than 0 or 1).",
			func() float64 { return float64(p.invalid.Load()) }, false),
		fn("kvroute_publisher_refused_subscriptions_total", "Subscriptions refused because their subscriber already held 256 distinct prefixes or 64 KiB of them.",
			func() float64 { return float64(p.refused.Load()) }, false),
		fn("kvroute_publisher_subscribers", "Connected subscribers.",
			func() float64 { return float64(p.nsubs.Load()) }, true),
	}
	if err := set.Register(cs...); err != nil {
		return fmt.Errorf("kvevents: registering publisher metrics: %w", err)
	}
	p.set, p.collectors = set, cs
	return nil
}

// Topic is frame 0 of every message.
func (p *Publisher) Topic() string { return string(p.topic) }

// Endpoint is the PUB address subscribers dial, "tcp://host:port".
func (p *Publisher) Endpoint() string { return p.l.Endpoint() }

// ReplayEndpoint is the replay address, "" when replay is off.
func (p *Publisher) ReplayEndpoint() string {
	if p.rsrv == nil {
		return ""
	}
	return p.rsrv.Endpoint()
}

// Stats returns the counters.
func (p *Publisher) Stats() Stats {
	return Stats{
		Published:   p.published.Load(),
		Queued:      p.queued.Load(),
		Dropped:     p.dropped.Load(),
		Rejected:    p.rejected.Load(),
		Handshakes:  p.handshakes.Load(),
		Invalid:     p.invalid.Load(),
		Refused:     p.refused.Load(),
		Subscribers: int(p.nsubs.Load()),
		Subscribed:  p.subscribed(),
	}
}

// ReplayStats returns the replay server's counters (zero without a replay
// socket).
func (p *Publisher) ReplayStats() replay.ServerStats {
	if p.rsrv == nil {
		return replay.ServerStats{}
	}
	return p.rsrv.Stats()
}

// subscribed counts the subscribers a Publish would reach.
func (p *Publisher) subscribed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for s := range p.subs {
		if s.matches(p.topic) {
			n++
		}
	}
	return n
}

// Publish sends payload (one msgpack KVEventBatch) with the next sequence
// number, which it returns. It copies payload (so the caller may reuse it),
// never blocks on subscribers, and buffers the batch for replay. Sequence
// numbers are consumed even when no subscriber is connected, as in vLLM.
func (p *Publisher) Publish(payload []byte) (uint64, error) {
	if len(payload) == 0 {
		return 0, ErrEmptyPayload
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.publishLocked(p.topic, append([]byte(nil), payload...))
}

// PublishTopic is Publish with topic as frame 0 instead of the configured
// topic: one publisher, one sequence, messages under several topics — an
// endpoint serving several models publishes each model's batches on its
// own kv@<ip:port>@<model> topic. The replay buffer keeps each message's
// topic, so replies in the current layout carry it too.
func (p *Publisher) PublishTopic(topic, payload []byte) (uint64, error) {
	if len(payload) == 0 {
		return 0, ErrEmptyPayload
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.publishLocked(append([]byte(nil), topic...), append([]byte(nil), payload...))
}

func (p *Publisher) publishLocked(topic, payload []byte) (uint64, error) {
	if p.closed {
		return 0, ErrClosed
	}
	seq := p.next
	p.next++
	p.published.Add(1)
	if p.buf != nil {
		p.buf.Add(seq, topic, payload)
	}
	m := &pubMessage{topic: topic, payload: payload}
	binary.BigEndian.PutUint64(m.seq[:], seq)
	for s := range p.subs {
		if !s.matches(topic) {
			continue
		}
		select {
		case s.q <- m:
			p.queued.Add(1)
		default:
			p.dropped.Add(1)
		}
	}
	return seq, nil
}

// Close stops accepting, disconnects every subscriber, closes the replay
// server, waits for all goroutines and unregisters the metrics New
// registered. Queued messages are discarded.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for s := range p.subs {
		s.stop()
	}
	p.mu.Unlock()
	err := p.l.Close()
	p.wg.Wait()
	if p.rsrv != nil {
		err = errors.Join(err, p.rsrv.Close())
	}
	p.set.Unregister(p.collectors...)
	return err
}

func (p *Publisher) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed || len(p.subs) >= p.cfg.MaxSubscribers {
			closed := p.closed
			p.mu.Unlock()
			_ = c.Close()
			if closed {
				return
			}
			p.rejected.Add(1)
			p.lg.Debug("subscriber rejected: limit reached", "remote", c.RemoteAddr().String())
			continue
		}
		s := newPubSubscriber(c, p.cfg.SendQueue)
		p.subs[s] = struct{}{}
		p.nsubs.Add(1)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.readLoop(s)
		go p.writeLoop(s)
	}
}

// drop removes s once; both of its goroutines call it when they end.
func (p *Publisher) drop(s *pubSubscriber) {
	s.stop()
	p.mu.Lock()
	if _, ok := p.subs[s]; ok {
		delete(p.subs, s)
		p.nsubs.Add(-1)
	}
	p.mu.Unlock()
}
