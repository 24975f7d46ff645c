package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/replay"
	"github.com/prometheus/client_golang/prometheus"
)

// Publisher defaults.
const (
	DefaultPublisherAddr      = "tcp://*:5556"
	DefaultPublisherSendQueue = 1000
	DefaultPublisherMaxSubs   = 256
	DefaultPublisherWriteWait = 5 * time.Second
)

// Publisher errors.
var (
	// ErrPublisherClosed is returned by Publish after Close.
	ErrPublisherClosed = errors.New("kvevents: publisher closed")
	// ErrEmptyPayload is returned for an empty payload, which a replay
	// client would take for the END sentinel.
	ErrEmptyPayload = errors.New("kvevents: empty payload")
)

// PublisherConfig configures a Publisher. The zero value binds
// DefaultPublisherAddr, uses the empty topic (vLLM's default) and serves no
// replays.
type PublisherConfig struct {
	// Addr is the PUB bind address ("tcp://*:5556", "127.0.0.1:0", ...).
	Addr string `json:"addr"`
	// Endpoint and Model build the topic kv@<Endpoint>@<Model>; Endpoint is
	// the engine's inference address (ip:port). Without an Endpoint the
	// topic is Topic.
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	// Topic is used verbatim when Endpoint is empty ("" = vLLM's default).
	Topic string `json:"topic"`
	// Format is the wire layout PublishBatch encodes (default FormatVLLM).
	Format Format `json:"format"`

	// ReplayAddr, when set, serves replay requests on a ROUTER there from a
	// ring of the last BufferSize batches.
	ReplayAddr   string        `json:"replayAddr"`
	ReplayLayout replay.Layout `json:"replayLayout"`
	BufferSize   int           `json:"bufferSize"` // default 10,000

	// SendQueue is each subscriber's queue, in messages (default 1000).
	// Publish never blocks: a message for a full queue is dropped and
	// counted, as a libzmq PUB does at its high-water mark.
	SendQueue int `json:"sendQueue"`
	// MaxSubscribers bounds connected subscribers (default 256).
	MaxSubscribers int `json:"maxSubscribers"`
	// WriteTimeout disconnects a subscriber whose socket accepts nothing for
	// this long (default 5 s).
	WriteTimeout time.Duration `json:"writeTimeout"`
	// HandshakeTimeout bounds each subscriber's ZMTP handshake (default 1 s).
	HandshakeTimeout time.Duration `json:"handshakeTimeout"`
}

// Validate reports invalid settings.
func (c PublisherConfig) Validate() error {
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
	case c.Format > FormatVLLMMapBatch:
		return fmt.Errorf("kvevents: publisher format %d unknown", c.Format)
	}
	return c.ReplayLayout.Validate()
}

// PublisherStats counts what a Publisher did.
type PublisherStats struct {
	Published   uint64 // batches published (sequence numbers used)
	Queued      uint64 // messages queued to subscribers (one per matching subscriber)
	Dropped     uint64 // messages dropped on a full subscriber queue
	Subscribers int    // connected subscribers
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
// both the ZMTP 3.0 message form and the 3.1 SUBSCRIBE/CANCEL commands).
type Publisher struct {
	cfg   PublisherConfig
	topic []byte
	lg    *slog.Logger
	l     *zmqx.Listener
	buf   *replay.Buffer
	rsrv  *replay.Server

	mu      sync.Mutex // orders sequence numbers and fan-out
	next    uint64
	subs    map[*pubSubscriber]struct{}
	closed  bool
	scratch []byte

	wg                         sync.WaitGroup
	published, queued, dropped atomic.Uint64
	nsubs                      atomic.Int64
}

// NewPublisher binds the PUB socket (and the replay socket when configured)
// and starts accepting subscribers. opts.Registerer receives the
// kvroute_publisher_* (and replay server) metrics; opts.Logger gets
// connection events at debug level.
func NewPublisher(cfg PublisherConfig, opts Options) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultPublisherAddr
	}
	if cfg.SendQueue == 0 {
		cfg.SendQueue = DefaultPublisherSendQueue
	}
	if cfg.MaxSubscribers == 0 {
		cfg.MaxSubscribers = DefaultPublisherMaxSubs
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultPublisherWriteWait
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{cfg: cfg, lg: lg, subs: make(map[*pubSubscriber]struct{})}
	if cfg.Endpoint != "" {
		p.topic = AppendTopic(nil, cfg.Endpoint, cfg.Model)
	} else {
		p.topic = []byte(cfg.Topic)
	}
	if err := p.register(opts.Registerer); err != nil {
		return nil, err
	}
	if cfg.ReplayAddr != "" {
		p.buf = replay.NewBuffer(cfg.BufferSize)
		srv, err := replay.NewServer(replay.ServerConfig{
			Addr: cfg.ReplayAddr, Layout: cfg.ReplayLayout, HandshakeTimeout: cfg.HandshakeTimeout,
		}, p.buf, replay.Options{Registerer: opts.Registerer, Logger: lg})
		if err != nil {
			return nil, err
		}
		p.rsrv = srv
	}
	l, err := zmqx.Listen(context.Background(), cfg.Addr, zmq4.Pub, zmqx.Options{
		HandshakeTimeout: cfg.HandshakeTimeout,
		WriteTimeout:     cfg.WriteTimeout,
		MaxFrameSize:     64 << 10, // subscriptions are small
	}, lg)
	if err != nil {
		if p.rsrv != nil {
			_ = p.rsrv.Close()
		}
		return nil, fmt.Errorf("kvevents: publisher: %w", err)
	}
	p.l = l
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

func (p *Publisher) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	fn := func(name, help string, f func() float64, gauge bool) prometheus.Collector {
		if gauge {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
		}
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	for _, c := range []prometheus.Collector{
		fn("kvroute_publisher_batches_total", "KV-event batches published.",
			func() float64 { return float64(p.published.Load()) }, false),
		fn("kvroute_publisher_dropped_total", "Messages dropped because a subscriber's queue was full.",
			func() float64 { return float64(p.dropped.Load()) }, false),
		fn("kvroute_publisher_subscribers", "Connected subscribers.",
			func() float64 { return float64(p.nsubs.Load()) }, true),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("kvevents: registering publisher metrics: %w", err)
		}
	}
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
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{
		Published:   p.published.Load(),
		Queued:      p.queued.Load(),
		Dropped:     p.dropped.Load(),
		Subscribers: int(p.nsubs.Load()),
	}
}

// Publish sends payload (one msgpack KVEventBatch) with the next sequence
// number, which it returns. It copies payload, never blocks on subscribers,
// and buffers the batch for replay. Sequence numbers are consumed even when
// no subscriber is connected, as in vLLM.
func (p *Publisher) Publish(payload []byte) (uint64, error) {
	if len(payload) == 0 {
		return 0, ErrEmptyPayload
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.publishLocked(append([]byte(nil), payload...))
}

// PublishBatch encodes b in the configured Format and publishes it.
func (p *Publisher) PublishBatch(b *Batch) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scratch = AppendBatch(p.scratch[:0], b, p.cfg.Format)
	return p.publishLocked(append([]byte(nil), p.scratch...))
}

func (p *Publisher) publishLocked(payload []byte) (uint64, error) {
	if p.closed {
		return 0, ErrPublisherClosed
	}
	seq := p.next
	p.next++
	p.published.Add(1)
	if p.buf != nil {
		p.buf.Add(seq, p.topic, payload)
	}
	m := &pubMessage{payload: payload}
	binary.BigEndian.PutUint64(m.seq[:], seq)
	for s := range p.subs {
		if !s.matches(p.topic) {
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
// server and waits for all goroutines. Queued messages are discarded.
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
