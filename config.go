package kvroute

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/kvroute/kvroute/accuracy"
	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/internal/labelselector"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/tokenload"
)

// Config configures a Router. The zero Config means the defaults, applied by
// New: every field left at its zero value (or nil) takes its default, and
// DefaultConfig shows them, following the llm-d deployment guide for precise
// prefix-cache routing. The settings whose zero is a setting of its own (a
// switch that is on by default, a number whose 0 turns something off) are
// pointers, nil meaning the default, as in Kubernetes API types: set one
// with new (cfg.Events.Enabled = new(false)) rather than through it, which
// would change every copy sharing the pointer. Only Model has no default.
//
// A Config decoded with LoadConfig rejects unknown keys at every level, so a
// misplaced setting is an error rather than silently ignored. The
// sub-configurations carry only what the Router does not set itself: the
// block size (blockSize), the speculative TTL (speculative.ttl) and the model
// (model) are set once, at the top level, and passed down; the keys
// index.blockSize, index.speculativeTTL, render.modelName and events.model
// are errors that name the top-level key.
type Config struct {
	// Model is the base model name the engines serve. It roots the block keys
	// of requests that name no model, is the render client's model for
	// probes and the events' model for messages that name none. Required.
	Model string `json:"model"`
	// BlockSize is the engines' KV block size in tokens (vLLM --block-size),
	// passed down to the index, the events and the accuracy loop. Default
	// 64 (kvindex.DefaultBlockSize); zero means the default.
	BlockSize int `json:"blockSize"`
	// EnableTowerConnectorLoRA keys the multimodal items of a request for a
	// LoRA adapter as vLLM does when started with --enable-lora and
	// --enable-tower-connector-lora (LoRAConfig.enable_tower_connector_lora):
	// the adapter then changes an item's embedding, so vLLM identifies the
	// item, in its blocks' extra keys, by "lora_name:mm_hash" rather than
	// by the mm_hash that render answers and token-in requests carry. Set
	// it to match engines started so; off (the default), items are keyed by
	// their mm_hash, and a LoRA request's items never match such an
	// engine's blocks. Requests without an adapter are keyed the same
	// either way.
	EnableTowerConnectorLoRA bool `json:"enableTowerConnectorLoRA"`
	// TowerConnectorLoRAPaths maps each adapter name (lora_name) to the
	// path the engines load it from (--lora-modules name=path), for vLLM
	// versions whose identifier also carries a fingerprint of that path:
	// "lora_name:" ‖ hex(SHA-256(CBOR text string of the path)) ‖ ":" ‖
	// mm_hash. Non-empty, every adapter it names is keyed so and any other
	// adapter as without a fingerprint (which such an engine never
	// matches); empty, every adapter is keyed without one. It requires
	// EnableTowerConnectorLoRA; names and paths must be non-empty.
	TowerConnectorLoRAPaths map[string]string `json:"towerConnectorLoRAPaths"`
	// DefaultMMLoRAs is the engines' --default-mm-loras (LoRAConfig.
	// default_mm_loras), as they take it: each modality ("image", "audio",
	// "video") to the adapter path vLLM loads under the modality's name.
	// vLLM's OpenAI server then runs a chat-completions request (and an
	// Anthropic Messages one, which it translates into one) whose model
	// names no adapter as the adapter named by the one modality its
	// content parts name ("image_url" parts name "image"; "input_audio"
	// names "input", no modality), and only when exactly one adapter
	// matches; the adapter's name roots the request's block keys.
	// kvroute applies the same rule: such a request's Request.LoRA is set
	// to the modality by Match, so that its keys, and the LoRA affinity
	// of package lora, are those of the adapter. Completions, Responses
	// and token-in requests never get one, in vLLM either. Empty, the
	// default, requests are keyed as they name themselves, and a request
	// vLLM gives a default adapter never matches its blocks. An adapter
	// the engines load under such a name otherwise (--lora-modules,
	// /v1/load_lora_adapter) takes part in vLLM's match as well: list it
	// too. Modalities must be non-empty without "_" (vLLM compares them
	// to a part's type up to its first "_", so such a one never
	// matches), paths non-empty, at most 64 entries. With
	// EnableTowerConnectorLoRA on engines that fingerprint the path, list
	// the modality's path in TowerConnectorLoRAPaths too.
	DefaultMMLoRAs map[string]string `json:"defaultMMLoRAs"`
	// Index configures the KV-block index (tier weights, capacity); its
	// BlockSize and SpeculativeTTL are the Router's (BlockSize,
	// Speculative.TTL) and must be left zero.
	Index kvindex.Config `json:"index"`
	// Events configures the KV-event subscriptions.
	Events EventsConfig `json:"events"`
	// Render configures the render client; its ModelName is the Router's
	// Model and must be left empty. Render.URL set means a fixed renderer;
	// empty means render against the routed endpoints themselves.
	Render render.Config `json:"render"`
	// DisableRender skips rendering: requests without Prompts are routed by
	// load alone. Useful for gateways that tokenize themselves.
	DisableRender bool `json:"disableRender"`
	// Affinity configures the prefix-cache affinity filter and its TTFT gate.
	Affinity affinity.Config `json:"affinity"`
	// QueueThresholdTokens is the token-load scorer's Q: an endpoint with Q
	// or more committed plus projected tokens scores 0. Default 4,194,304
	// (tokenload.DefaultQueueThresholdTokens); zero means the default.
	QueueThresholdTokens int64 `json:"queueThresholdTokens"`
	// LoadWeight weighs the token-load score: a finite number >= 0.
	// Default 1 (DefaultLoadWeight); zero means the default.
	LoadWeight float64 `json:"loadWeight"`
	// LoadTieTolerance widens the pick stage's ties for picks decided by
	// load: a kept candidate whose total score is below the best by at most
	// the token-load score of LoadTieTolerance × the best candidate's
	// uncached tokens for this request (that many tokens of load, at
	// LoadWeight / QueueThresholdTokens per token) counts as tied with it,
	// and the tie goes to the rendezvous hash of the request's first new
	// block, as exact ties do (see Router). Router replicas sharing their
	// load (Config.Cluster) see a peer's dispatch one round trip late;
	// without a tolerance, a new prefix goes to the least-loaded endpoint,
	// which is the one a peer may have just loaded, so one missed dispatch
	// sends the prefix elsewhere than one router would. With a tolerance of
	// a few prompts the replicas agree unless the loads are that far apart.
	// It costs balance: a new prefix may land on an endpoint that much
	// busier than the least-loaded. 0 (the default) ties only equal scores;
	// finite and >= 0. An experiment: see bench/README.md ("Router
	// replicas").
	LoadTieTolerance float64 `json:"loadTieTolerance"`
	// OpenRequestTokens is the load, in tokens, that each request still open
	// on an endpoint (dispatched by this router and not Done, so also while
	// it streams its answer) adds to the endpoint's committed tokens in the
	// token-load score; the affinity filter's gate is unchanged. It tells an
	// endpoint busy decoding from an idle one. Default 1,024
	// (tokenload.DefaultOpenRequestTokens); nil means the default, 0
	// disables it.
	OpenRequestTokens *int64 `json:"openRequestTokens"`
	// Speculative configures speculative index entries for chosen endpoints.
	Speculative SpeculativeConfig `json:"speculative"`
	// Requests bounds the table that makes in-flight requests addressable
	// by request ID (Router.Decision).
	Requests tokenload.RequestTableConfig `json:"requests"`
	// Checkpoint configures the index checkpoint file (off by default; see
	// package checkpoint).
	Checkpoint checkpoint.Config `json:"checkpoint"`
	// Bootstrap configures starting the index from peer replicas, and the
	// token of SnapshotHandler.
	Bootstrap checkpoint.BootstrapConfig `json:"bootstrap"`

	// Cluster makes the router one of several active-active replicas sharing
	// in-flight load, routing decisions and membership through Redis; off
	// (nothing of it runs) while Cluster.Addrs is empty. Its other keys are
	// validated all the same, so that a mistake in them is reported before
	// the addresses are added.
	Cluster cluster.Config `json:"cluster"`
	// Accuracy configures the closed loop on the index's accuracy (fed by
	// Decision.Done with the engine's cached tokens; see package accuracy).
	Accuracy accuracy.Config `json:"accuracy"`
	// Readiness configures Router.Ready.
	Readiness ReadinessConfig `json:"readiness"`
	// MetricLabels adds constant labels (llm-d's plugin labels) to the
	// metrics that carry them in llm-d.
	MetricLabels MetricLabelsConfig `json:"metricLabels"`
}

// EventsConfig configures the KV-event subscriber pool: the pool's own
// configuration (kvevents.PoolConfig, whose keys appear inline in JSON, and
// whose zero fields mean the pool's defaults) plus the switch that turns
// subscriptions on and the two settings whose default under a Router differs
// from the pool's. The pool's Model is the Router's Model and must be left
// empty, and its Replay and TopicFilter are set by the fields of the same
// name here, which hide them.
type EventsConfig struct {
	// Enabled turns the subscriptions on. Default true; nil means the
	// default. A Router without events still routes (by speculative entries
	// and load).
	Enabled *bool `json:"enabled"`
	// Selector is a Kubernetes label selector ("role=decode, zone in
	// (a,b)"); only endpoints whose labels match are subscribed. Empty
	// subscribes every endpoint. It accepts exactly what Kubernetes'
	// labels.Parse accepts, with the same meaning.
	Selector string `json:"selector"`
	// Replay enables replay for endpoints without a ReplayAddress, on
	// ReplayPort (kvevents.PoolConfig.Replay). Default true; nil means the
	// default.
	Replay *bool `json:"replay"`
	// TopicFilter is the ZeroMQ subscription prefix
	// (kvevents.PoolConfig.TopicFilter). Default "kv@" (DefaultTopicFilter);
	// nil means the default, "" subscribes to every message.
	TopicFilter *string `json:"topicFilter"`
	kvevents.PoolConfig
}

// SpeculativeConfig configures speculative entries: after a decision the
// chosen endpoint counts as holding the request's blocks until the engine's
// BlockStored event confirms them or the TTL passes.
type SpeculativeConfig struct {
	// Enabled turns speculative entries on. Default true; nil means the
	// default.
	Enabled *bool `json:"enabled"`
	// TTL is how long an unconfirmed entry lives, passed down to the index.
	// Default 2 s (kvindex.DefaultSpeculativeTTL); zero means the default.
	TTL time.Duration `json:"ttl"`
}

// The Router's own defaults, those of llm-d's precise prefix-cache routing
// guide (see the package doc). Every other default is declared by the
// package that owns the setting (kvindex's block size and speculative TTL,
// kvevents' ports and workers, tokenload's Q and open-request load, render's
// and affinity's settings) and passed down from here.
const (
	// DefaultTopicFilter is EventsConfig.TopicFilter's default: the prefix of
	// the topics llm-d's engines publish under (the pool alone subscribes to
	// every topic).
	DefaultTopicFilter = "kv@"
	// DefaultLoadWeight is Config.LoadWeight's default.
	DefaultLoadWeight = 1.0
)

// ErrInvalidConfig is wrapped by every configuration error of this package.
var ErrInvalidConfig = errors.New("kvroute: invalid config")

// DefaultConfig shows the defaults a zero Config stands for (Model aside,
// which has none): block size 64, events on port 5556 with replay on 5559,
// topic filter "kv@", 4 event workers, a 60 s idle deadline, render's
// defaults (a 2 s attempt timeout among them), the affinity filter's
// defaults (threshold 0.80, 18 s TTFT penalty at 15,928 tokens/s), Q =
// 4,194,304, 1,024 tokens of load per open request and speculative entries
// with a 2 s TTL. New(ctx, Config{Model: m}, opts) and New(ctx, c, opts) with
// c := DefaultConfig(); c.Model = m build the same Router.
func DefaultConfig() Config { return Config{}.withDefaults() }

// withDefaults returns c with every field the Router reads left at its zero
// value (or nil) set to its default: the configuration a Router built from c
// runs with. The pool's and the index's other zero fields are left for
// kvevents.NewPool and kvindex.New, which apply them; the ones
// DefaultConfig shows are set here from the constants those packages
// declare.
func (c Config) withDefaults() Config {
	if c.BlockSize == 0 {
		c.BlockSize = kvindex.DefaultBlockSize
	}
	if c.QueueThresholdTokens == 0 {
		c.QueueThresholdTokens = tokenload.DefaultQueueThresholdTokens
	}
	if c.LoadWeight == 0 {
		c.LoadWeight = DefaultLoadWeight
	}
	if c.OpenRequestTokens == nil {
		c.OpenRequestTokens = new(tokenload.DefaultOpenRequestTokens)
	}
	if c.Speculative.Enabled == nil {
		c.Speculative.Enabled = new(true)
	}
	if c.Speculative.TTL == 0 {
		c.Speculative.TTL = kvindex.DefaultSpeculativeTTL
	}
	if c.Readiness.GiveUpAfter == 0 {
		c.Readiness.GiveUpAfter = DefaultGiveUpAfter
	}
	c.Render = c.Render.WithDefaults()
	c.Affinity = c.Affinity.WithDefaults()
	c.Events = c.Events.withDefaults()
	return c
}

// withDefaults sets the Router's event defaults (see Config.withDefaults).
func (e EventsConfig) withDefaults() EventsConfig {
	if e.Enabled == nil {
		e.Enabled = new(true)
	}
	if e.Replay == nil {
		e.Replay = new(true)
	}
	if e.TopicFilter == nil {
		e.TopicFilter = new(DefaultTopicFilter)
	}
	if e.EventsPort == 0 {
		e.EventsPort = kvevents.DefaultEventsPort
	}
	if e.ReplayPort == 0 {
		e.ReplayPort = kvevents.DefaultReplayPort
	}
	if e.Concurrency == 0 {
		e.Concurrency = kvevents.DefaultConcurrency
	}
	if e.IdleTimeout == 0 {
		e.IdleTimeout = kvevents.DefaultIdleTimeout
	}
	return e
}

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.BlockSize < 0:
		return bad("blockSize %d is negative", c.BlockSize)
	case c.QueueThresholdTokens < 0:
		return bad("queueThresholdTokens %d is negative", c.QueueThresholdTokens)
	case math.IsNaN(c.LoadWeight) || math.IsInf(c.LoadWeight, 0) || c.LoadWeight < 0:
		return bad("loadWeight %v must be a finite number >= 0", c.LoadWeight)
	case math.IsNaN(c.LoadTieTolerance) || math.IsInf(c.LoadTieTolerance, 0) || c.LoadTieTolerance < 0:
		return bad("loadTieTolerance %v must be a finite number >= 0", c.LoadTieTolerance)
	case c.OpenRequestTokens != nil && *c.OpenRequestTokens < 0:
		return bad("openRequestTokens %d is negative", *c.OpenRequestTokens)
	case c.Speculative.TTL < 0:
		return bad("speculative.ttl %v is negative", c.Speculative.TTL)
	case c.Requests.MaxRequests < 0:
		return bad("requests.maxRequests %d is negative", c.Requests.MaxRequests)
	case c.Requests.TTL < 0:
		return bad("requests.ttl %v is negative", c.Requests.TTL)
	case len(c.TowerConnectorLoRAPaths) > 0 && !c.EnableTowerConnectorLoRA:
		return bad("towerConnectorLoRAPaths is set without enableTowerConnectorLoRA, and would key nothing")
	}
	for name, path := range c.TowerConnectorLoRAPaths {
		if name == "" || path == "" {
			return bad("towerConnectorLoRAPaths: adapter %q has path %q: names and paths must be non-empty", name, path)
		}
	}
	if len(c.DefaultMMLoRAs) > maxDefaultMMLoRAs {
		return bad("defaultMMLoRAs has %d entries, more than %d", len(c.DefaultMMLoRAs), maxDefaultMMLoRAs)
	}
	for mod, path := range c.DefaultMMLoRAs {
		switch {
		case mod == "" || path == "":
			return bad("defaultMMLoRAs: modality %q has path %q: modalities and paths must be non-empty", mod, path)
		case strings.Contains(mod, "_"):
			return bad("defaultMMLoRAs: modality %q contains \"_\": vLLM matches it against a content part's type up to its first \"_\", so it never applies", mod)
		}
	}
	if err := c.validateOwned(); err != nil {
		return err
	}
	if err := c.Index.Validate(); err != nil {
		return fmt.Errorf("%w: index.%w", ErrInvalidConfig, err)
	}
	if err := c.Accuracy.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.MetricLabels.Validate(); err != nil {
		return err
	}
	if err := c.Affinity.Validate(); err != nil {
		return fmt.Errorf("%w: affinity: %w", ErrInvalidConfig, err)
	}
	if err := c.Events.PoolConfig.Validate(); err != nil {
		return fmt.Errorf("%w: events: %w", ErrInvalidConfig, err)
	}
	if _, err := labelselector.Parse(c.Events.Selector); err != nil {
		return fmt.Errorf("%w: events.selector: %w", ErrInvalidConfig, err)
	}
	if err := c.Render.Validate(); err != nil {
		return fmt.Errorf("%w: render: %w", ErrInvalidConfig, err)
	}
	if err := validateCluster(c.Cluster); err != nil {
		return fmt.Errorf("%w: cluster: %w", ErrInvalidConfig, err)
	}
	if err := c.Checkpoint.Validate(); err != nil {
		return fmt.Errorf("%w: checkpoint.%w", ErrInvalidConfig, err)
	}
	if err := c.Bootstrap.Validate(); err != nil {
		return fmt.Errorf("%w: bootstrap.%w", ErrInvalidConfig, err)
	}
	return nil
}

// LoadConfig decodes a JSON configuration on top of DefaultConfig: keys that
// are absent keep their defaults, unknown keys (at any level) are an error
// naming their path, every duration is a Go duration string ("2s", "250ms";
// a bare number is an error), and the result is validated. A document that
// also carries llm-d plugin parameters is an error here: llmd.Load reads it
// (and llmd.Translate, which refuses every llm-d setting kvroute does not
// carry over).
func LoadConfig(r io.Reader) (Config, error) {
	return jsonconf.Load(r, DefaultConfig(), func(err error) error {
		if errors.Is(err, ErrInvalidConfig) { // a section's own UnmarshalJSON named it
			return err
		}
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}, Config.Validate)
}
