package kvroute

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kvroute/kvroute/affinity"
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
	// of requests that name no model, and is the render client's model for
	// probes.
	Model string `json:"model"`
	// BlockSize is the engines' KV block size in tokens (vLLM --block-size);
	// it overrides Index.BlockSize. Default 64.
	BlockSize int `json:"blockSize"`
	// Index configures the KV-block index (tier weights, capacity,
	// speculative TTL).
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
	// Requests bounds the table that makes in-flight load addressable by
	// request ID (Router.FirstChunk, Router.Done).
	Requests tokenload.RequestTableConfig `json:"requests"`
}

// EventsConfig configures the KV-event subscriber pool: the pool's own
// configuration (kvevents.PoolConfig, whose keys appear inline in JSON) plus
// the switch that turns subscriptions on.
type EventsConfig struct {
	// Enabled turns the subscriptions on. Default true; a Router without
	// events still routes (by speculative entries and load).
	Enabled bool `json:"enabled"`
	kvevents.PoolConfig
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

// The deployment guide's values.
const (
	DefaultBlockSize      = 64
	DefaultEventsPort     = 5556
	DefaultReplayPort     = 5559
	DefaultTopicFilter    = "kv@"
	DefaultConcurrency    = 4
	DefaultAttemptTimeout = 2 * time.Second
	DefaultSpeculativeTTL = 2 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
)

// ErrInvalidConfig is wrapped by every configuration error of this package.
var ErrInvalidConfig = errors.New("kvroute: invalid config")

// DefaultConfig returns the configuration of the deployment guide: block size
// 64, events on port 5556 with replay on 5559, topic filter "kv@", 4 event
// workers, a 60 s idle deadline, a 2 s render attempt timeout, the affinity filter's defaults
// (threshold 0.80, 18 s TTFT penalty at 15,928 tokens/s), Q = 4,194,304,
// 1,024 tokens of load per open request and speculative entries with a 2 s TTL.
func DefaultConfig() Config {
	r := render.DefaultConfig()
	r.AttemptTimeout = DefaultAttemptTimeout
	return Config{
		BlockSize: DefaultBlockSize,
		Events: EventsConfig{
			Enabled: true,
			PoolConfig: kvevents.PoolConfig{
				EventsPort:  DefaultEventsPort,
				Replay:      true,
				ReplayPort:  DefaultReplayPort,
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
		Speculative:          SpeculativeConfig{Enabled: true, TTL: DefaultSpeculativeTTL},
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
	if err := c.Affinity.Validate(); err != nil {
		return fmt.Errorf("%w: affinity: %w", ErrInvalidConfig, err)
	}
	if err := c.Events.PoolConfig.Validate(); err != nil {
		return fmt.Errorf("%w: events: %w", ErrInvalidConfig, err)
	}
	if err := c.Render.Validate(); err != nil {
		return fmt.Errorf("%w: render: %w", ErrInvalidConfig, err)
	}
	return nil
}

// LoadConfig decodes a JSON configuration on top of DefaultConfig: keys that
// are absent keep their defaults, unknown keys (at any level) are an error,
// and the result is validated.
func LoadConfig(r io.Reader) (Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, err
	}
	cfg := DefaultConfig()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if dec.More() {
		return Config{}, fmt.Errorf("%w: trailing data after the configuration object", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
