package publish

import (
	"fmt"
	"sync"
	"time"

	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
)

// Defaults of a Publisher.
const (
	// DefaultAddr is vLLM's default KV-event PUB address.
	DefaultAddr = zmqpub.DefaultAddr
	// DefaultSendQueue is each subscriber's queue, in messages.
	DefaultSendQueue = zmqpub.DefaultSendQueue
	// DefaultMaxSubscribers bounds connected subscribers.
	DefaultMaxSubscribers = zmqpub.DefaultMaxSubs
	// DefaultWriteTimeout disconnects a subscriber that accepts nothing for
	// this long.
	DefaultWriteTimeout = zmqpub.DefaultWriteWait
)

// Errors of Publish and PublishBatch.
var (
	// ErrClosed is returned after Close.
	ErrClosed = zmqpub.ErrClosed
	// ErrEmptyPayload is returned by Publish for an empty payload, which a
	// replay client would take for the END sentinel.
	ErrEmptyPayload = zmqpub.ErrEmptyPayload
)

// Config configures a Publisher. The zero value binds DefaultAddr, uses the
// empty topic (vLLM's default), encodes wire.FormatVLLM and serves no
// replays. Durations are Go duration strings in JSON ("5s"), and the format
// its name ("sglang-map").
type Config struct {
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
	// In JSON it is the layout's name, as wire.Format's String gives it:
	// "vllm", "vllm-legacy", "sglang", "sglang-map", "trtllm" or
	// "vllm-map-batch"; a number or another name is an error.
	Format wire.Format `json:"format"`

	// ReplayAddr, when set, serves replay requests on a ROUTER there from a
	// ring of the last BufferSize batches (default 10,000, at most
	// 4,194,304: the ring is allocated up front), answering in
	// ReplayLayout.
	ReplayAddr   string        `json:"replayAddr"`
	ReplayLayout replay.Layout `json:"replayLayout"`
	BufferSize   int           `json:"bufferSize"`
	// ReplaySendHWM, when positive, drops replay replies past that many
	// queued for a client, as vLLM's ROUTER does past libzmq's send
	// high-water mark (1,000); 0 never drops (see replay.ServerConfig; at
	// most 1,048,576).
	ReplaySendHWM int `json:"replaySendHWM"`
	// ReplayIdleTimeout closes a replay client's connection once it has
	// sent nothing for this long, so that silent clients cannot keep the
	// replay server's connection slots from the routers that need a replay
	// (default "1m", replay.DefaultServerIdleTimeout; counted in
	// kvroute_replay_server_idle_closed_total).
	ReplayIdleTimeout time.Duration `json:"replayIdleTimeout"`

	// SendQueue is each subscriber's queue, in messages (default 1000, at
	// most 1,048,576: the queue is allocated when the subscriber connects).
	// Publish never blocks: a message for a full queue is dropped and
	// counted, as a libzmq PUB does at its high-water mark.
	SendQueue int `json:"sendQueue"`
	// MaxSubscribers bounds connected subscribers (default 256).
	MaxSubscribers int `json:"maxSubscribers"`
	// WriteTimeout disconnects a subscriber whose socket accepts nothing for
	// this long (default "5s").
	WriteTimeout time.Duration `json:"writeTimeout"`
	// HandshakeTimeout bounds each subscriber's ZMTP handshake (default
	// "1s").
	HandshakeTimeout time.Duration `json:"handshakeTimeout"`
}

func (c Config) core() zmqpub.Config {
	return zmqpub.Config{
		Addr: c.Addr, Endpoint: c.Endpoint, Model: c.Model, Topic: c.Topic,
		ReplayAddr: c.ReplayAddr, ReplayLayout: c.ReplayLayout, BufferSize: c.BufferSize, ReplaySendHWM: c.ReplaySendHWM,
		SendQueue: c.SendQueue, MaxSubscribers: c.MaxSubscribers,
		WriteTimeout: c.WriteTimeout, HandshakeTimeout: c.HandshakeTimeout,
		ReplayIdleTimeout: c.ReplayIdleTimeout,
	}
}

// Validate reports invalid settings.
func (c Config) Validate() error {
	if c.Format.String() == "unknown" { // every format AppendBatch writes has a name
		return fmt.Errorf("kvevents: publisher format %d unknown", c.Format)
	}
	return c.core().Validate()
}

// Options are the injected dependencies of a Publisher; the zero value is
// valid.
type Options struct {
	// Set is the observability bundle (registerer, logger, tracer
	// provider, clock; see package telemetry):
	//   Registerer receives the publisher's metrics (batches published,
	//   messages dropped at a full subscriber queue, subscribers rejected at
	//   the limit, failed handshakes, invalid subscriber messages, refused
	//   subscriptions, all kvroute_publisher_*_total, and the
	//   kvroute_publisher_subscribers gauge) and the replay server's; nil
	//   registers none.
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

// Publisher is a KV-event publisher: a PUB socket sending [topic, seq as 8
// bytes big-endian, payload] with sequences from 0, plus an optional replay
// server answering [seq] requests from its buffer, like vLLM's
// ZmqEventPublisher. Its methods are safe for concurrent use.
//
// Each subscriber connection gets a bounded queue and a writer goroutine, so
// memory is bounded by MaxSubscribers × SendQueue messages plus the replay
// buffer, and Close stops every goroutine. Subscriptions are honoured (prefix
// match on the topic, in both the ZMTP 3.0 message form and the 3.1
// SUBSCRIBE/CANCEL commands), up to 256 distinct prefixes and 64 KiB of them
// per subscriber; further ones are refused and counted (Stats.Refused).
type Publisher struct {
	core   *zmqpub.Publisher
	format wire.Format

	mu      sync.Mutex // guards scratch
	scratch []byte
}

// New binds the PUB socket (and the replay socket when configured) and
// starts accepting subscribers.
func New(cfg Config, opts Options) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	core, err := zmqpub.New(cfg.core(), zmqpub.Options{Set: telemetry.Set{Registerer: opts.Registerer, Logger: opts.Logger}})
	if err != nil {
		return nil, err
	}
	return &Publisher{core: core, format: cfg.Format}, nil
}

// Topic is frame 0 of every message.
func (p *Publisher) Topic() string { return p.core.Topic() }

// Endpoint is the PUB address subscribers dial, "tcp://host:port".
func (p *Publisher) Endpoint() string { return p.core.Endpoint() }

// ReplayEndpoint is the replay address, "" when replay is off.
func (p *Publisher) ReplayEndpoint() string { return p.core.ReplayEndpoint() }

// Stats returns the counters.
func (p *Publisher) Stats() Stats { return Stats(p.core.Stats()) }

// Publish sends payload (one msgpack KVEventBatch) with the next sequence
// number, which it returns. It copies payload, never blocks on subscribers,
// and buffers the batch for replay. Sequence numbers are consumed even when
// no subscriber is connected, as in vLLM.
func (p *Publisher) Publish(payload []byte) (uint64, error) { return p.core.Publish(payload) }

// PublishBatch encodes b in the configured Format (wire.AppendBatch) and
// publishes it like Publish.
func (p *Publisher) PublishBatch(b *wire.Batch) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scratch = wire.AppendBatch(p.scratch[:0], b, p.format)
	return p.core.Publish(p.scratch)
}

// PublishBatchTopic is PublishBatch with topic as frame 0 instead of the
// configured topic, under the same sequence: an engine serving several
// models publishes each model's batches on its own kv@<ip:port>@<model>
// topic through one socket. Replay replies in the current layout carry
// each batch's own topic.
func (p *Publisher) PublishBatchTopic(topic []byte, b *wire.Batch) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scratch = wire.AppendBatch(p.scratch[:0], b, p.format)
	return p.core.PublishTopic(topic, p.scratch)
}

// Close stops accepting, disconnects every subscriber, closes the replay
// server and waits for all goroutines. Queued messages are discarded. It is
// idempotent.
func (p *Publisher) Close() error { return p.core.Close() }
