package kvroute

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
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

// Config configures a Router. DefaultConfig matches the llm-d deployment
// guide for precise prefix-cache routing; a Config decoded with LoadConfig
// rejects unknown keys at every level, so a misplaced setting is an error
// rather than silently ignored.
type Config struct {
	// Model is the base model name the engines serve. It roots the block keys
	// of requests that name no model, is the render client's model for
	// probes and the events' model for messages that name none. It is the one
	// place the model is set: render.modelName and events.model must be empty
	// or equal to it.
	Model string `json:"model"`
	// BlockSize is the engines' KV block size in tokens (vLLM --block-size).
	// It is the one place the block size is set: a non-zero index.blockSize
	// that differs from it is an error. Default 64.
	BlockSize int `json:"blockSize"`
	// Index configures the KV-block index (tier weights, capacity). Its
	// blockSize and speculativeTTL are set by the top-level blockSize and
	// speculative.ttl; setting them here to another value is an error.
	Index kvindex.Config `json:"index"`
	// Events configures the KV-event subscriptions.
	Events EventsConfig `json:"events"`
	// Render configures the render client. Render.URL set means a fixed
	// renderer; empty means render against the routed endpoints themselves.
	Render render.Config `json:"render"`
	// DisableRender skips rendering: requests without Prompts are routed by
	// load alone. Useful for gateways that tokenize themselves.
	DisableRender bool `json:"disableRender"`
	// Affinity configures the prefix-cache affinity filter and its TTFT gate.
	Affinity affinity.Config `json:"affinity"`
	// QueueThresholdTokens is the token-load scorer's Q: an endpoint with Q
	// or more committed plus projected tokens scores 0. Default 4,194,304.
	QueueThresholdTokens int64 `json:"queueThresholdTokens"`
	// LoadWeight weighs the token-load score. Default 1.
	LoadWeight float64 `json:"loadWeight"`
	// OpenRequestTokens is the load, in tokens, that each request still open
	// on an endpoint (dispatched by this router and not Done, so also while
	// it streams its answer) adds to the endpoint's committed tokens in the
	// token-load score; the affinity filter's gate is unchanged. It tells an
	// endpoint busy decoding from an idle one. Default 1,024; 0 disables it.
	OpenRequestTokens int64 `json:"openRequestTokens"`
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
	// (nothing of it runs) while Cluster.Addrs is empty.
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
// configuration (kvevents.PoolConfig, whose keys appear inline in JSON) plus
// the switch that turns subscriptions on.
type EventsConfig struct {
	// Enabled turns the subscriptions on. Default true; a Router without
	// events still routes (by speculative entries and load).
	Enabled bool `json:"enabled"`
	// Selector is a Kubernetes label selector ("role=decode, zone in
	// (a,b)"); only endpoints whose labels match are subscribed. Empty
	// subscribes every endpoint. It accepts exactly what Kubernetes'
	// labels.Parse accepts, with the same meaning.
	Selector string `json:"selector"`
	kvevents.PoolConfig
}

// eventsFields is EventsConfig without the JSON methods it would otherwise
// take from the embedded PoolConfig; it is what jsonconf checks and decodes.
type eventsFields struct {
	Enabled  bool   `json:"enabled"`
	Selector string `json:"selector"`
	kvevents.PoolConfig
}

// UnmarshalJSON decodes e strictly, with the pool's keys inline: unknown keys
// are an error naming their path and durations are Go duration strings. Keys
// not present keep their current value. (Without it, the PoolConfig methods
// promoted by embedding would drop "enabled".)
func (e *EventsConfig) UnmarshalJSON(data []byte) error {
	var own struct {
		Enabled  *bool   `json:"enabled"`
		Selector *string `json:"selector"`
	}
	if err := jsonconf.Check(data, reflect.TypeFor[eventsFields]()); err != nil {
		return err
	}
	if err := json.Unmarshal(data, &own); err != nil {
		return err
	}
	rest, err := withoutKey(data, "enabled", "selector")
	if err != nil {
		return err
	}
	if err := e.PoolConfig.UnmarshalJSON(rest); err != nil {
		return err
	}
	if own.Enabled != nil {
		e.Enabled = *own.Enabled
	}
	if own.Selector != nil {
		e.Selector = *own.Selector
	}
	return nil
}

// MarshalJSON encodes e with the pool's keys inline and durations as Go
// duration strings.
func (e EventsConfig) MarshalJSON() ([]byte, error) {
	pool, err := e.PoolConfig.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(pool, &m); err != nil {
		return nil, err
	}
	m["enabled"], _ = json.Marshal(e.Enabled)
	m["selector"], _ = json.Marshal(e.Selector)
	return json.Marshal(m)
}

// withoutKey returns the JSON object data without its keys ks.
func withoutKey(data []byte, ks ...string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return data, nil
	}
	for _, k := range ks {
		delete(m, k)
	}
	return json.Marshal(m)
}

// SpeculativeConfig configures speculative entries: after a decision the
// chosen endpoint counts as holding the request's blocks until the engine's
// BlockStored event confirms them or the TTL passes.
type SpeculativeConfig struct {
	// Enabled turns speculative entries on. Default true.
	Enabled bool `json:"enabled"`
	// TTL is how long an unconfirmed entry lives. Default 2 s.
	TTL time.Duration `json:"ttl"`
}

// kvroute's own defaults, those of llm-d's precise prefix-cache routing
// guide (see the package doc). The block size and the speculative TTL are
// kvindex's (kvindex.DefaultBlockSize, kvindex.DefaultSpeculativeTTL) and
// the events and replay ports kvevents' (kvevents.DefaultEventsPort,
// kvevents.DefaultReplayPort): declared there, passed down from here.
const (
	DefaultTopicFilter    = "kv@"
	DefaultConcurrency    = 4
	DefaultAttemptTimeout = 2 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
)

// ErrInvalidConfig is wrapped by every configuration error of this package.
var ErrInvalidConfig = errors.New("kvroute: invalid config")

// DefaultConfig returns kvroute's defaults, which follow llm-d's precise
// prefix-cache routing guide (see the package doc): block size 64, events on
// port 5556 with replay on 5559, topic filter "kv@", 4 event workers, a 60 s
// idle deadline, a 2 s render attempt timeout, the affinity filter's defaults
// (threshold 0.80, 18 s TTFT penalty at 15,928 tokens/s), Q = 4,194,304, 1,024
// tokens of load per open request and speculative entries with a 2 s TTL.
func DefaultConfig() Config {
	r := render.DefaultConfig()
	r.AttemptTimeout = DefaultAttemptTimeout
	return Config{
		BlockSize: kvindex.DefaultBlockSize,
		Events: EventsConfig{
			Enabled: true,
			PoolConfig: kvevents.PoolConfig{
				EventsPort:  kvevents.DefaultEventsPort,
				Replay:      true,
				ReplayPort:  kvevents.DefaultReplayPort,
				TopicFilter: DefaultTopicFilter,
				Concurrency: DefaultConcurrency,
				IdleTimeout: DefaultIdleTimeout,
			},
		},
		Render:               r,
		Affinity:             affinity.DefaultConfig(),
		QueueThresholdTokens: tokenload.DefaultQueueThresholdTokens,
		LoadWeight:           1,
		OpenRequestTokens:    tokenload.DefaultOpenRequestTokens,
		Speculative:          SpeculativeConfig{Enabled: true, TTL: kvindex.DefaultSpeculativeTTL},
	}
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
	case c.LoadWeight < 0:
		return bad("loadWeight %v is negative", c.LoadWeight)
	case c.OpenRequestTokens < 0:
		return bad("openRequestTokens %d is negative", c.OpenRequestTokens)
	case c.Speculative.TTL < 0:
		return bad("speculative.ttl %v is negative", c.Speculative.TTL)
	}
	switch {
	case c.Index.BlockSize != 0 && c.Index.BlockSize != c.BlockSize:
		return bad("index.blockSize %d conflicts with blockSize %d: the block size is set once, by the top-level blockSize", c.Index.BlockSize, c.BlockSize)
	case c.Index.SpeculativeTTL != 0 && c.Index.SpeculativeTTL != c.Speculative.TTL:
		return bad("index.speculativeTTL %v conflicts with speculative.ttl %v: under a Router the speculative TTL is set by speculative.ttl", c.Index.SpeculativeTTL, c.Speculative.TTL)
	case c.Render.ModelName != "" && c.Render.ModelName != c.Model:
		return bad("render.modelName %q conflicts with model %q: the model is set once, by the top-level model", c.Render.ModelName, c.Model)
	case c.Events.Model != "" && c.Events.Model != c.Model:
		return bad("events.model %q conflicts with model %q: the model is set once, by the top-level model", c.Events.Model, c.Model)
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
// also carries llm-d plugin parameters is read by llmd.Translate.
func LoadConfig(r io.Reader) (Config, error) {
	cfg := DefaultConfig()
	if err := jsonconf.Decode(r, &cfg); err != nil {
		if errors.Is(err, ErrInvalidConfig) {
			return Config{}, err
		}
		return Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c strictly wherever a Config is decoded (LoadConfig,
// a larger JSON document, sigs.k8s.io/yaml): unknown keys are an error naming
// their path and durations are Go duration strings. Keys not present keep
// their current value.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with every duration as a Go duration string, the form
// LoadConfig reads.
func (c Config) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(configFields(c))
}
