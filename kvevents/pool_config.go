package kvevents

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/replay"
)

// Pool defaults.
const (
	defaultConcurrency    = 4
	defaultQueueSize      = 16384
	defaultQueueBytes     = 32 << 20
	defaultEndpointBytes  = 8 << 20
	defaultBindMaxStreams = 1024
	defaultHoldSize       = 4096
	defaultHoldBytes      = 16 << 20
	defaultIdleTimeout    = 60 * time.Second
	defaultMinBackoff     = 100 * time.Millisecond
	defaultMaxBackoff     = 2 * time.Second
	defaultReplayCooldown = 30 * time.Second
	// defaultHeartbeatInterval and defaultHeartbeatTimeout: a SUB pings its
	// publisher every 2 s and gives it up when nothing arrives within 5 s
	// of a PING (libzmq answers PINGs by itself).
	defaultHeartbeatInterval = 2 * time.Second
	defaultHeartbeatTimeout  = 5 * time.Second
	// defaultTailProbeDelay: a stream that goes quiet after traffic is
	// probed once, this long after its last message.
	defaultTailProbeDelay = time.Second
	// defaultPublisherSilence: three missed heartbeats of a publisher that
	// sends one every second.
	defaultPublisherSilence = 3 * time.Second
	// defaultReplayLookahead is how far a replayed sequence may run ahead of
	// the live stream: the messages that can be in flight between vLLM's PUB
	// (which sends a batch before buffering it for replay) and the
	// subscriber's receive loop, which takes messages as fast as they come.
	defaultReplayLookahead = 1000
	// defaultReplayMinRate and defaultReplayGrace: a replay that live
	// messages wait for must cover them at 100 batches/s after a 2 s grace.
	defaultReplayMinRate = 100
	defaultReplayGrace   = 2 * time.Second
)

// Upper bounds of the settings NewPool sizes memory or arithmetic by.
const (
	// maxConcurrency bounds Concurrency: a worker is a goroutine and a
	// queue.
	maxConcurrency = 1024
	// maxQueueSlots bounds Concurrency × QueueSize (defaults applied):
	// every worker's queue is allocated up front, 72 bytes a slot on a
	// 64-bit machine, so the slots take at most 288 MiB.
	maxQueueSlots = 1 << 22
	// maxBindMaxStreams bounds BindMaxStreams: bind mode serves four times
	// as many connections.
	maxBindMaxStreams = 1 << 20
	// maxTopicFilter bounds TopicFilter's bytes. Every connection writes it
	// as its subscription right after the handshake; one larger than the
	// kernel's socket buffers blocks that write on a peer that stops
	// reading, for as long as the heartbeat allows. vLLM's topics are a
	// few dozen bytes.
	maxTopicFilter = 4096
)

// PoolConfig configures a Pool. The zero value is valid: per-endpoint
// subscribers, 4 workers, no replay unless an Endpoint names a replay
// address.
type PoolConfig struct {
	// Concurrency is the number of workers applying events to the index
	// (default 4, at most 1024). One endpoint's messages always go to the
	// same worker, in order; endpoints are spread over the workers.
	Concurrency int `json:"concurrency"`
	// QueueSize bounds each worker's queue, in messages (default 16384;
	// Concurrency × QueueSize at most 4,194,304, as every queue is
	// allocated up front, 72 bytes a message). A
	// message that finds its queue full is dropped, counted
	// (kvroute_kv_events_dropped_total{reason="queue_full"}) and its
	// endpoint catches up by replay. The messages are shared like the
	// bytes: an endpoint may always queue its share (QueueSize / endpoints
	// on the worker) and beyond it only what the others' shares leave free,
	// so a flood of tiny payloads drops its own messages, not a quiet
	// endpoint's.
	QueueSize int `json:"queueSize"`
	// QueueBytes bounds the payload bytes queued on each worker (default
	// 32 MiB; a message whose topic names a model other than its
	// endpoint's configured one counts the name too), and
	// EndpointQueueBytes those of one endpoint (default 8 MiB;
	// one message is always admitted into an endpoint's empty queue). A
	// message beyond either bound is dropped like one beyond QueueSize, and
	// it is the flooding endpoint's message that is dropped: an endpoint
	// within its fair share of a worker keeps flowing (see the worker).
	// The defaults hold bursts of 100 endpoints × 100 messages/s of
	// 16-block batches (about 1 KiB each) for several seconds: 4 × 16,384
	// messages, 128 MiB.
	QueueBytes         int `json:"queueBytes"`
	EndpointQueueBytes int `json:"endpointQueueBytes"`
	// HoldSize bounds the live messages held per endpoint while a replay
	// runs (default 4096). Beyond it live messages are dropped (reason
	// "hold_full") and repaired by a further replay.
	HoldSize int `json:"holdSize"`
	// HoldBytes bounds the payload bytes held per endpoint while a replay
	// runs (default 16 MiB), with the same overflow rule as HoldSize.
	HoldBytes int `json:"holdBytes"`
	// Model is the model used for messages whose endpoint and topic name
	// none (vLLM's default empty topic).
	Model string `json:"model"`
	// TopicFilter is the ZeroMQ subscription prefix (default "": every
	// message; vLLM's default topic is empty), at most 4,096 bytes.
	TopicFilter string `json:"topicFilter"`

	// EventsPort is the default port of an endpoint's PUB socket (default
	// 5556).
	EventsPort int `json:"eventsPort"`
	// Replay enables replay for endpoints without a ReplayAddress, on
	// ReplayPort, when their engine kind is vLLM's or TensorRT-LLM's: an
	// "sglang" endpoint replays only from an explicit ReplayAddress (SGLang
	// opens its replay socket only when configured), a "noreplay" one never.
	Replay bool `json:"replay"`
	// ReplayPort is the default port of an endpoint's replay socket
	// (default 5559).
	ReplayPort int `json:"replayPort"`
	// ReplayCooldown: after a failed replay, no replay is attempted for the
	// endpoint for this long (default 30 s); gaps in that time clear the
	// endpoint and rebuild it from the live stream.
	ReplayCooldown time.Duration `json:"replayCooldown"`
	// ClearOnResumeGap: an endpoint started from a recorded position
	// (checkpoint or peer snapshot) whose replay buffer no longer covers
	// that position is cleared and rebuilt from the replay window, instead
	// of keeping the loaded entries (the default; see resumeState for the
	// trade-off).
	ClearOnResumeGap bool `json:"clearOnResumeGap"`
	// ReplayClient configures the replay client (deadlines, attempts). Its
	// Limiter defaults to replay.DefaultLimiter(), shared by the process.
	ReplayClient replay.ClientConfig `json:"replayClient"`
	// Tracing turns on sampled KV-event spans (events_receive,
	// events_process, events_decode) when Options.TracerProvider is given;
	// off by default. In a kvroute.Config this is events.tracing:
	// {"enabled": true, "sampleRatio": 0.01}.
	Tracing EventTracing `json:"tracing"`

	// HeartbeatInterval is how often each subscription, and in bind mode
	// each engine connection, sends a ZMTP PING to the engine (a duration
	// string, default "2s"; negative disables heartbeats). libzmq answers by
	// itself, so a quiet engine stays connected and a frozen or partitioned
	// one is detected.
	HeartbeatInterval time.Duration `json:"heartbeatInterval"`
	// HeartbeatTimeout drops a subscription (bind mode: an engine
	// connection) whose engine sent nothing within this long of a PING
	// (default "5s"); the drop counts as a recv error of the endpoint, and
	// the subscriber reconnects (bind mode: the engine does).
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout"`
	// IdleTimeout, used only when heartbeats are disabled, recreates a
	// subscription socket that received no byte for this long (default
	// "60s"; negative disables). Such a recycle counts no error and no
	// reconnection: vLLM publishes nothing while idle. In bind mode it
	// closes such an engine connection, and libzmq reconnects; the engine's
	// endpoints show as not connected (degraded) until it publishes again,
	// which is one more reason to keep heartbeats on.
	IdleTimeout time.Duration `json:"idleTimeout"`
	// TailProbeDelay: when a stream with a replay address goes quiet after
	// traffic, its replay socket is asked once, this long after the last
	// message (default "1s"; negative disables), for anything after the
	// watermark, with the reconnect check (the batch at the watermark must
	// be the one applied, else the engine restarted and the endpoint is
	// rebuilt). A publisher's HWM can drop the last batches of a burst, and
	// nothing else would notice before the engine's next batch. A probe that
	// falls due while a replay runs or the stream cools down after a failed
	// one is tried again this long later (or when the cooldown ends).
	TailProbeDelay time.Duration `json:"tailProbeDelay"`
	// ReplayLookahead bounds the sequences a replay may deliver: at most this
	// many beyond the highest sequence the live stream (on the current
	// connection) or the replay request has shown (default 1000), however
	// fast the replay streams. A batch beyond it is rejected as a protocol
	// error (zmq_errors_total{operation="replay-protocol"}), the replay
	// fails, and an endpoint whose watermark the replay had already moved
	// past the live stream is cleared and rebuilt from the live stream, so a
	// bogus replay cannot make live messages be skipped as already applied.
	// A replay before any live message on the connection is unbounded, and
	// the first live message then checks the watermark with the same slack.
	// An engine snapshot's sequence is held to the same slack, behind and
	// ahead of the live stream (snapshot_errors_total{reason=
	// "seq_out_of_range"}; see the stream's snapshot phase).
	ReplayLookahead uint64 `json:"replayLookahead"`
	// ReplayMinRate and ReplayGrace: while live messages wait for a replay
	// (held), the replay must have covered up to the held messages by
	// ReplayGrace (default "2s") plus one second per ReplayMinRate batches of
	// the range (default 100). A replay that falls behind, waiting for a slot
	// included, is cut short (replays_total{result="cut_short"}) and the
	// endpoint applies the live stream from the first held message; the
	// batches before it are recovered by a rebuild from 0 that waits for a
	// replay slot without holding the live stream (the endpoint is degraded
	// until then). An engine snapshot load that live messages wait for is
	// held to the same allowance until its reply arrives, or abandoned
	// (snapshot_errors_total{reason="stalled"}) for the replay.
	ReplayMinRate int           `json:"replayMinRate"`
	ReplayGrace   time.Duration `json:"replayGrace"`
	// Engine is the engine kind of endpoints that name none (default
	// "vllm"); see Endpoint.Engine.
	Engine EngineKind `json:"engine"`
	// HandshakeTimeout bounds the ZMTP handshake of each connection
	// (default 1 s).
	HandshakeTimeout time.Duration `json:"handshakeTimeout"`
	// DialTimeout bounds the TCP connect of each dial (default 1 s).
	DialTimeout time.Duration `json:"dialTimeout"`
	// MaxFrameSize is the largest ZeroMQ frame accepted (default 64 MiB): a
	// peer announcing a larger one loses its connection.
	MaxFrameSize int64 `json:"maxFrameSize"`
	// MinBackoff and MaxBackoff bound the pause between reconnect attempts
	// (defaults 100 ms and 2 s); it doubles after each failure.
	MinBackoff time.Duration `json:"minBackoff"`
	MaxBackoff time.Duration `json:"maxBackoff"`

	// Limits bound what one payload may make the decoder do.
	Limits wire.Limits `json:"limits"`

	// LoRANames maps lora_id to the adapter name for engines that send
	// lora_id without lora_name (see ApplierConfig.LoRANames); an adapter
	// store without a name is skipped (reason "lora_unnamed"), never keyed
	// under the base model.
	LoRANames map[int64]string `json:"loraNames,omitempty"`

	// BindAddress switches the pool to bind mode: one SUB socket binds this
	// address ("tcp://*:5557"), engines connect their PUB to it, and each
	// message's endpoint comes from its topic kv@<ip:port>@<model>. Ensure
	// then only registers endpoint settings (model, replay address, labels).
	BindAddress string `json:"bindAddress"`
	// BindKnownOnly is kept for configurations written before
	// BindAnyTopic existed; known-only is now the default and this field
	// changes nothing.
	BindKnownOnly bool `json:"bindKnownOnly"`
	// BindAnyTopic, in bind mode, indexes every endpoint whose topic
	// parses, not only those passed to Ensure (at most BindMaxStreams of
	// them), when the endpoint it names is an ID Ensure would accept
	// (host:port, at most 259 bytes of UTF-8): the ID labels the
	// endpoint's series. Off by default: any peer that can connect could otherwise
	// create streams and index entries at will. Messages of other topics
	// are dropped and counted in kvroute_kv_events_bind_unknown_total (one
	// unlabelled series).
	BindAnyTopic bool `json:"bindAnyTopic"`
	// BindAnySource, in bind mode, lets a connection from any address claim
	// an endpoint's topic. By default a topic kv@<host:port>@<model> is
	// accepted only on a connection whose source IP is <host>, the pod IP
	// the endpoint ID names (given by the operator or found by discovery),
	// so that a peer elsewhere cannot take over an endpoint's stream, for
	// instance while its engine restarts; messages from another address are
	// dropped and counted in kvroute_kv_events_bind_source_mismatch_total
	// (one unlabelled series). An endpoint ID whose host is not an IP
	// address matches no source. Set it when engines reach kvroute through
	// NAT or a proxy, so that their source address is not their pod IP.
	BindAnySource bool `json:"bindAnySource"`
	// BindMaxStreams caps the streams bind mode creates (default 1024, at
	// most 1,048,576); beyond it messages of new endpoints are dropped and
	// counted as unknown.
	BindMaxStreams int `json:"bindMaxStreams"`
	// BindRanks is the number of data-parallel ranks that connect to the
	// bind socket (default 1). vLLM offsets the port its PUB connects to by
	// the rank, and all ranks of an engine share one topic: rank r connects
	// to BindAddress's port + r. The pool binds one socket per rank, and a
	// message on socket r with topic kv@<host:port>@<model> belongs to the
	// endpoint <host>:<port + r> (rank 0: the topic's own endpoint),
	// registered with Ensure with Rank r; it never merges with another
	// rank's. BindRanks above 1 needs an explicit BindAddress port.
	BindRanks int `json:"bindRanks"`

	// PublisherSilence (added with publisher identities): a publisher seen
	// sending vLLM's publisher identity or idle heartbeats (an empty batch
	// every second when its snapshots are on) that sends nothing for this
	// long marks its endpoint degraded, even while its socket stays open,
	// until it is heard again (default "3s"; negative disables). Counted in
	// kvroute_kv_events_heartbeat_timeouts_total. Publishers without
	// heartbeats are never judged by their silence.
	PublisherSilence time.Duration `json:"publisherSilence"`

	// Snapshot loads an engine's whole cache from its vLLM snapshot socket
	// where a replay cannot rebuild the endpoint (snapshot_config.go); off
	// by default.
	Snapshot SnapshotConfig `json:"snapshot"`
}

// LoadPoolConfig reads a JSON PoolConfig over the zero PoolConfig (absent
// keys mean the defaults NewPool applies): unknown keys are an error naming
// their path, durations are Go duration strings ("60s") and a bare number for
// one is an error.
func LoadPoolConfig(r io.Reader) (PoolConfig, error) {
	return jsonconf.Load(r, PoolConfig{}, jsonconf.Prefixed("kvevents: pool config"), PoolConfig.Validate)
}

// Validate reports the first invalid setting.
func (c PoolConfig) Validate() error {
	neg := func(name string, v int64) error {
		if v < 0 {
			return fmt.Errorf("kvevents: pool config: %s must not be negative, got %d", name, v)
		}
		return nil
	}
	port := func(name string, v int) error {
		if v < 0 || v > 65535 {
			return fmt.Errorf("kvevents: pool config: %s %d out of range", name, v)
		}
		return nil
	}
	if err := errors.Join(
		neg("concurrency", int64(c.Concurrency)), neg("queueSize", int64(c.QueueSize)),
		neg("holdSize", int64(c.HoldSize)), neg("holdBytes", int64(c.HoldBytes)),
		neg("queueBytes", int64(c.QueueBytes)), neg("endpointQueueBytes", int64(c.EndpointQueueBytes)),
		neg("bindRanks", int64(c.BindRanks)), neg("bindMaxStreams", int64(c.BindMaxStreams)),
		neg("replayCooldown", int64(c.ReplayCooldown)),
		neg("handshakeTimeout", int64(c.HandshakeTimeout)), neg("dialTimeout", int64(c.DialTimeout)),
		neg("maxFrameSize", c.MaxFrameSize), neg("minBackoff", int64(c.MinBackoff)),
		neg("maxBackoff", int64(c.MaxBackoff)), neg("heartbeatTimeout", int64(c.HeartbeatTimeout)),
		neg("replayMinRate", int64(c.ReplayMinRate)), neg("replayGrace", int64(c.ReplayGrace)),
		port("eventsPort", c.EventsPort), port("replayPort", c.ReplayPort),
	); err != nil {
		return err
	}
	if err := c.checkBounds(); err != nil {
		return err
	}
	if c.MinBackoff > 0 && c.MaxBackoff > 0 && c.MaxBackoff < c.MinBackoff {
		return fmt.Errorf("kvevents: pool config: maxBackoff %v is below minBackoff %v", c.MaxBackoff, c.MinBackoff)
	}
	if err := c.Engine.validate(); err != nil {
		return fmt.Errorf("kvevents: pool config: %w", err)
	}
	if err := validateBind(c); err != nil {
		return err
	}
	if err := c.ReplayClient.Validate(); err != nil {
		return fmt.Errorf("kvevents: pool config: %w", err)
	}
	if err := c.Snapshot.validate(); err != nil {
		return err
	}
	return c.Tracing.validate()
}

// checkBounds refuses the sizes NewPool could not honour: a worker count or
// queue whose up-front allocation would exhaust memory (or, far enough out,
// panic), and a stream cap whose connection bound overflows int.
func (c PoolConfig) checkBounds() error {
	conc, qs := c.Concurrency, c.QueueSize
	if conc == 0 {
		conc = defaultConcurrency
	}
	if qs == 0 {
		qs = defaultQueueSize
	}
	switch {
	case conc > maxConcurrency:
		return fmt.Errorf("kvevents: pool config: concurrency %d must be at most %d", conc, maxConcurrency)
	case qs > maxQueueSlots/conc:
		return fmt.Errorf("kvevents: pool config: queueSize %d × concurrency %d must be at most %d messages: NewPool allocates every worker's queue up front",
			qs, conc, maxQueueSlots)
	case c.BindMaxStreams > maxBindMaxStreams:
		return fmt.Errorf("kvevents: pool config: bindMaxStreams %d must be at most %d", c.BindMaxStreams, maxBindMaxStreams)
	case len(c.TopicFilter) > maxTopicFilter:
		return fmt.Errorf("kvevents: pool config: topicFilter of %d bytes must be at most %d", len(c.TopicFilter), maxTopicFilter)
	}
	return nil
}

// withDefaults fills zero fields with their defaults.
func (c PoolConfig) withDefaults() PoolConfig {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Concurrency, defaultConcurrency)
	c.Tracing = c.Tracing.withDefaults()
	def(&c.QueueSize, defaultQueueSize)
	def(&c.QueueBytes, defaultQueueBytes)
	def(&c.EndpointQueueBytes, defaultEndpointBytes)
	def(&c.BindRanks, 1)
	def(&c.BindMaxStreams, defaultBindMaxStreams)
	def(&c.HoldSize, defaultHoldSize)
	def(&c.HoldBytes, defaultHoldBytes)
	def(&c.EventsPort, defaultEventsPort)
	def(&c.ReplayPort, defaultReplayPort)
	defD(&c.ReplayCooldown, defaultReplayCooldown)
	defD(&c.IdleTimeout, defaultIdleTimeout)
	if c.IdleTimeout < 0 {
		c.IdleTimeout = 0
	}
	defD(&c.HeartbeatInterval, defaultHeartbeatInterval)
	if c.HeartbeatInterval < 0 {
		c.HeartbeatInterval = 0
	}
	defD(&c.HeartbeatTimeout, defaultHeartbeatTimeout)
	defD(&c.TailProbeDelay, defaultTailProbeDelay)
	if c.TailProbeDelay < 0 {
		c.TailProbeDelay = 0
	}
	defD(&c.PublisherSilence, defaultPublisherSilence)
	if c.PublisherSilence < 0 {
		c.PublisherSilence = 0
	}
	if c.ReplayLookahead == 0 {
		c.ReplayLookahead = defaultReplayLookahead
	}
	def(&c.ReplayMinRate, defaultReplayMinRate)
	defD(&c.ReplayGrace, defaultReplayGrace)
	if c.Engine == "" {
		c.Engine = EngineVLLM
	}
	defD(&c.MinBackoff, defaultMinBackoff)
	defD(&c.MaxBackoff, defaultMaxBackoff)
	c.MaxBackoff = max(c.MaxBackoff, c.MinBackoff)
	if c.ReplayClient.Limiter == nil {
		c.ReplayClient.Limiter = replay.DefaultLimiter()
	}
	c.Snapshot = c.Snapshot.withDefaults()
	return c
}
