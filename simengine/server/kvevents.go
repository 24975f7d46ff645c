package server

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvevents/publish"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/telemetry"
)

// Defaults of KVEventsConfig, as vLLM's KVEventsConfig.
const (
	DefaultKVEventsEndpoint = "tcp://*:5557"
	DefaultBufferSteps      = 10_000
	DefaultHWM              = 100_000
)

// vllmReplaySendHWM is the send high-water mark of vLLM's replay ROUTER:
// libzmq's default, which vLLM does not change.
const vllmReplaySendHWM = 1000

// KVEventsConfig is vLLM's --kv-events-config JSON (its KVEventsConfig). Keys are
// vLLM's snake_case names; unknown keys are an error.
type KVEventsConfig struct {
	// EnableKVCacheEvents is the master switch.
	EnableKVCacheEvents bool `json:"enable_kv_cache_events"`
	// Publisher is "zmq" or "null"; empty means "zmq" when enabled (newer vLLM).
	Publisher string `json:"publisher"`
	// Endpoint is the PUB address (default tcp://*:5557). The simulated engine
	// always binds it; vLLM would connect instead for an address without "*".
	Endpoint string `json:"endpoint"`
	// ReplayEndpoint, when set, serves replays on a ROUTER there, which drops
	// replies past 1,000 queued for a client as vLLM's does.
	ReplayEndpoint *string `json:"replay_endpoint"`
	// BufferSteps is the replay ring size in batches (default 10,000, at
	// most 4,194,304).
	BufferSteps int `json:"buffer_steps"`
	// HWM bounds each subscriber's send queue in messages (default 100,000,
	// at most 1,048,576).
	HWM int `json:"hwm"`
	// MaxQueueSize is accepted for compatibility; the Go publisher never
	// queues between engine and socket, so it has no effect.
	MaxQueueSize int `json:"max_queue_size"`
	// Topic is frame 0 of every message (default "").
	Topic string `json:"topic"`
	// SnapshotEndpoint, when set, serves KV-cache snapshots on a ROUTER
	// there with vLLM's snapshot protocol (vllm-project/vllm#57789): the
	// engine's resident blocks, the sequence they are consistent with and
	// the publisher identity (snapshot_serve.go).
	SnapshotEndpoint *string `json:"snapshot_endpoint"`
}

// ErrBadKVEventsConfig is wrapped by every --kv-events-config error.
var ErrBadKVEventsConfig = errors.New("simengine: invalid --kv-events-config")

// ParseKVEventsConfig decodes and validates the --kv-events-config JSON; an
// empty string gives the disabled default.
func ParseKVEventsConfig(s string) (KVEventsConfig, error) {
	var c KVEventsConfig
	if strings.TrimSpace(s) == "" {
		return c, nil
	}
	if err := jsonconf.Unmarshal([]byte(s), &c); err != nil {
		return c, fmt.Errorf("%w: %v", ErrBadKVEventsConfig, err)
	}
	return c, c.Validate()
}

// Validate reports invalid settings.
func (c KVEventsConfig) Validate() error {
	switch {
	case c.Publisher != "" && c.Publisher != "zmq" && c.Publisher != "null":
		return fmt.Errorf("%w: publisher %q (want \"zmq\" or \"null\")", ErrBadKVEventsConfig, c.Publisher)
	case c.BufferSteps < 0:
		return fmt.Errorf("%w: buffer_steps %d < 0", ErrBadKVEventsConfig, c.BufferSteps)
	case c.HWM < 0:
		return fmt.Errorf("%w: hwm %d < 0", ErrBadKVEventsConfig, c.HWM)
	case c.BufferSteps > zmqpub.MaxBufferSize:
		return fmt.Errorf("%w: buffer_steps %d > %d (the replay ring is allocated up front)", ErrBadKVEventsConfig, c.BufferSteps, zmqpub.MaxBufferSize)
	case c.HWM > zmqpub.MaxSendQueue:
		return fmt.Errorf("%w: hwm %d > %d (each subscriber's queue is allocated when it connects)", ErrBadKVEventsConfig, c.HWM, zmqpub.MaxSendQueue)
	case c.MaxQueueSize < 0:
		return fmt.Errorf("%w: max_queue_size %d < 0", ErrBadKVEventsConfig, c.MaxQueueSize)
	}
	return nil
}

// Active reports whether events are published: enabled and publisher not "null".
func (c KVEventsConfig) Active() bool {
	return c.EnableKVCacheEvents && c.Publisher != "null"
}

// ParseEventFormat maps the --kv-events-format value to the wire format:
// "current" (or "") is vLLM after vllm#42892 (map events), "legacy" the last
// all-array layout.
func ParseEventFormat(s string) (wire.Format, error) {
	switch s {
	case "", "current":
		return wire.FormatVLLM, nil
	case "legacy":
		return wire.FormatVLLMLegacy, nil
	}
	return 0, fmt.Errorf("simengine: --kv-events-format %q (want \"current\" or \"legacy\")", s)
}

// EventPublisher is a simengine.EventSink that publishes every batch through a
// publish.Publisher (ZeroMQ PUB plus the replay server), encoded like vLLM.
// With a snapshot_endpoint it is vLLM's snapshot revision of the publisher:
// every batch carries the publisher identity and an idle publisher sends
// heartbeats (kvevents_liveness.go).
//
// mu serialises the engine's goroutine (PublishKVEvents) and the heartbeat
// goroutine: a batch takes its sequence number, is recorded for snapshots
// and marks the publisher busy in one step, so the recorder sees the
// sequences in order.
type EventPublisher struct {
	pub        *publish.Publisher
	failed     atomic.Uint64
	suppress   atomic.Bool
	suppressed atomic.Uint64
	snap       *snapshotService // nil without snapshot_endpoint
	live       *liveness        // nil without snapshot_endpoint; set under mu (its goroutine reads it under mu), fixed once NewEventPublisher returns

	mu    sync.Mutex
	batch wire.Batch // guarded by mu
}

// NewEventPublisher binds the sockets of an active KVEventsConfig, encoding
// batches in format f. opts.Registry (nil: none) receives the publisher's
// metrics, opts.Logger its connection events, and opts.Clock (nil: the wall
// clock) times the idle heartbeats.
func NewEventPublisher(c KVEventsConfig, f wire.Format, opts Options) (*EventPublisher, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var reg prometheus.Registerer
	if opts.Registry != nil {
		reg = opts.Registry
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	ep := c.Endpoint
	if ep == "" {
		ep = DefaultKVEventsEndpoint
	}
	if !strings.Contains(ep, "*") && !strings.Contains(ep, "::") {
		lg.Warn("vLLM would connect (not bind) to a KV-events endpoint without '*'; the simulated engine binds it", "endpoint", ep)
	}
	pc := publish.Config{
		Addr: ep, Topic: c.Topic, Format: f, BufferSize: c.BufferSteps, SendQueue: c.HWM,
	}
	if pc.BufferSize == 0 {
		pc.BufferSize = DefaultBufferSteps
	}
	if pc.SendQueue == 0 {
		pc.SendQueue = DefaultHWM
	}
	if c.ReplayEndpoint != nil {
		pc.ReplayAddr = *c.ReplayEndpoint
		// vLLM's replay ROUTER keeps libzmq's default send high-water mark
		// and drops the replies a slow client has not taken beyond it.
		pc.ReplaySendHWM = vllmReplaySendHWM
	}
	pub, err := publish.New(pc, publish.Options{Set: telemetry.Set{Registerer: reg, Logger: lg}})
	if err != nil {
		return nil, err
	}
	snap, err := startSnapshots(c, f, Options{Logger: lg})
	if err != nil {
		_ = pub.Close()
		return nil, err
	}
	p := &EventPublisher{pub: pub, snap: snap}
	if snap != nil {
		snap.lock = &p.mu
	}
	if snap != nil {
		// Under p.mu, which the heartbeat goroutine takes before it reads
		// p.live: a heartbeat due at once (a loaded machine) must not race
		// the assignment.
		p.mu.Lock()
		p.live = startLiveness(p, snap.id, opts.Clock)
		p.mu.Unlock()
	}
	return p, nil
}

// PublishKVEvents implements simengine.EventSink.
func (p *EventPublisher) PublishKVEvents(b simengine.EventBatch) {
	if p.suppress.Load() {
		p.suppressed.Add(1)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ToKVEventsBatch(&p.batch, b)
	p.publishLocked(&p.batch, b)
}

// publishTopic is PublishKVEvents on topic instead of the configured one,
// under the same sequence (an extra model's engine; models.go).
func (p *EventPublisher) publishTopic(topic []byte, b simengine.EventBatch) {
	if p.suppress.Load() {
		p.suppressed.Add(1)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ToKVEventsBatch(&p.batch, b)
	p.publishToLocked(topic, &p.batch, b)
}

// publishLocked publishes dst (the wire form of b), stamped with the
// publisher identity, and records it for snapshots. p.mu is held.
func (p *EventPublisher) publishLocked(dst *wire.Batch, b simengine.EventBatch) {
	p.publishToLocked(nil, dst, b)
}

// publishToLocked is publishLocked on topic (nil: the configured one).
func (p *EventPublisher) publishToLocked(topic []byte, dst *wire.Batch, b simengine.EventBatch) {
	if p.live != nil {
		dst.PublisherID, dst.HasPublisherID = p.live.id, true
	}
	var seq uint64
	var err error
	if topic == nil {
		seq, err = p.pub.PublishBatch(dst)
	} else {
		seq, err = p.pub.PublishBatchTopic(topic, dst)
	}
	if err != nil {
		p.failed.Add(1)
		return
	}
	if p.snap != nil {
		p.snap.recorder(topic).record(seq, b)
	}
	if p.live != nil {
		p.live.sent()
	}
}

// Suppress turns the fault injection of a broken publisher on or off: while
// on, batches are dropped before they get a sequence number, so neither the
// live stream nor the replay buffer ever holds them and a subscriber sees no
// gap. A router then believes the engine lacks blocks it holds (and holds
// blocks it evicted) until the engine's cache turns over; only comparing
// predictions with the engine's reported cached_tokens reveals it.
func (p *EventPublisher) Suppress(on bool) { p.suppress.Store(on) }

// Suppressed counts the batches dropped by Suppress.
func (p *EventPublisher) Suppressed() uint64 { return p.suppressed.Load() }

// Endpoint is the bound PUB address ("tcp://host:port").
func (p *EventPublisher) Endpoint() string { return p.pub.Endpoint() }

// ReplayEndpoint is the bound replay address, "" without replay.
func (p *EventPublisher) ReplayEndpoint() string { return p.pub.ReplayEndpoint() }

// Topic is frame 0 of every message.
func (p *EventPublisher) Topic() string { return p.pub.Topic() }

// Stats returns the publisher's counters.
func (p *EventPublisher) Stats() publish.Stats { return p.pub.Stats() }

// Failed counts batches the publisher refused (only after Close).
func (p *EventPublisher) Failed() uint64 { return p.failed.Load() }

// Close stops the heartbeats and closes the sockets.
func (p *EventPublisher) Close() error {
	if p.live != nil {
		p.live.close()
	}
	if p.snap != nil {
		_ = p.snap.srv.Close()
	}
	return p.pub.Close()
}

// ToKVEventsBatch converts an engine batch into dst (reusing its slices) with
// exactly the fields vLLM sets: data_parallel_rank 0, lora_id only with a LoRA,
// medium "GPU", extra_keys with one entry per block, group_idx on stores and
// removals (0 without the hybrid mode; simengine.HybridConfig.GroupOrder
// numbers its groups), kv_cache_spec_kind on
// stores, and kv_cache_spec_sliding_window on a sliding-window group's stores.
func ToKVEventsBatch(dst *wire.Batch, b simengine.EventBatch) {
	dst.Reset()
	dst.TS = float64(b.Time.UnixNano()) / 1e9
	dst.DPRank, dst.HasDPRank = 0, true
	if cap(dst.Events) < len(b.Events) {
		dst.Events = make([]wire.Event, 0, len(b.Events))
	}
	for i := range b.Events {
		src := &b.Events[i]
		dst.Events = append(dst.Events, wire.Event{})
		e := &dst.Events[len(dst.Events)-1]
		switch src.Type {
		case simengine.BlockStored:
			e.Type = wire.EventBlockStored
			e.BlockHashes = src.BlockHashes
			e.HasParent, e.ParentHash = src.HasParent, src.ParentHash
			e.TokenIDs = src.TokenIDs
			e.BlockSize = src.BlockSize
			e.Medium, e.LoRAName = src.Medium, src.LoRAName
			if src.LoRAName != "" {
				e.HasLoRAID, e.LoRAID = true, int64(src.LoRAID)
			}
			e.ExtraKeys = make([][]wire.ExtraKey, len(src.BlockHashes))
			for j, keys := range src.ExtraKeys {
				for _, k := range keys {
					e.ExtraKeys[j] = append(e.ExtraKeys[j], k.Wire())
				}
			}
			e.HasGroup, e.Group, e.Kind = true, src.GroupIdx, src.Kind
			if src.SlidingWindow > 0 { // hybrid mode's window group
				e.HasSlidingWindow, e.SlidingWindow = true, int64(src.SlidingWindow)
			}
		case simengine.BlockRemoved:
			e.Type = wire.EventBlockRemoved
			e.BlockHashes = src.BlockHashes
			e.Medium = src.Medium
			e.HasGroup, e.Group = true, src.GroupIdx
		case simengine.AllBlocksCleared:
			e.Type = wire.EventAllBlocksCleared
		}
	}
}

// multiSink fans a batch out to several sinks.
type multiSink []simengine.EventSink

func (m multiSink) PublishKVEvents(b simengine.EventBatch) {
	for _, s := range m {
		s.PublishKVEvents(b)
	}
}
