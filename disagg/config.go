package disagg

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/kvroute/kvroute/internal/jsonconf"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultNonCachedTokens is the uncached prompt tokens on the decode
	// endpoint at or above which a request is disaggregated. llm-d's
	// prefix-based decider compares the same quantity with its
	// nonCachedTokens, whose shipped value 0 turns disaggregation off
	// (here: do not configure the profile); this default is Dynamo's
	// documented max_local_prefill_length (1000), below which a prompt is
	// cheaper to prefill where it decodes than to transfer.
	DefaultNonCachedTokens = 1000
	// DefaultDecodeQueueRequests is the number of open requests at which a
	// decode endpoint's load score reaches 0.
	DefaultDecodeQueueRequests = 128
	// DefaultDecodeCacheWeight is the decode pick's weight of the cached share of
	// the prompt.
	DefaultDecodeCacheWeight = 1.0
	// DefaultDecodeLoadWeight is the decode pick's weight of the free share of
	// its decode capacity.
	DefaultDecodeLoadWeight = 1.0
)

// Config configures the Profile (the gateway's "disagg" block).
type Config struct {
	// NonCachedTokens is the decider's threshold: a request whose decode
	// endpoint would have to compute at least this many uncached prompt
	// tokens is disaggregated (a prefill endpoint computes them and the
	// KV cache is transferred); below it the decode endpoint prefills
	// locally. 0 means DefaultNonCachedTokens; negative disaggregates every
	// request that has a prompt.
	NonCachedTokens int64 `json:"nonCachedTokens"`
	// MaxPrefillQueueTokens is the optional prefill-load rule, after
	// Dynamo's conditional disaggregation (remote prefill only while the
	// prefill queue is short): a request is prefilled locally when even the
	// chosen prefill endpoint already has this many prompt tokens in flight.
	// 0, the default, disables the rule.
	MaxPrefillQueueTokens int64 `json:"maxPrefillQueueTokens"`
	// DecodeQueueRequests is the decode pick's load scale: an endpoint's
	// load score is 1 − min(open requests, DecodeQueueRequests) /
	// DecodeQueueRequests. 0 means DefaultDecodeQueueRequests.
	DecodeQueueRequests int64 `json:"decodeQueueRequests"`
	// DecodeCacheWeight weighs the cached share of the prompt on a decode
	// candidate in its score; 0 means DefaultDecodeCacheWeight.
	DecodeCacheWeight float64 `json:"decodeCacheWeight"`
	// DecodeLoadWeight weighs a decode candidate's load score; 0 means
	// DefaultDecodeLoadWeight.
	DecodeLoadWeight float64 `json:"decodeLoadWeight"`
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("disagg: invalid configuration")

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.MaxPrefillQueueTokens < 0:
		return fmt.Errorf("%w: maxPrefillQueueTokens %d is negative", ErrInvalidConfig, c.MaxPrefillQueueTokens)
	case c.DecodeQueueRequests < 0:
		return fmt.Errorf("%w: decodeQueueRequests %d is negative", ErrInvalidConfig, c.DecodeQueueRequests)
	case c.DecodeCacheWeight < 0 || math.IsNaN(c.DecodeCacheWeight) || math.IsInf(c.DecodeCacheWeight, 0):
		return fmt.Errorf("%w: decodeCacheWeight %v is not a finite non-negative number", ErrInvalidConfig, c.DecodeCacheWeight)
	case c.DecodeLoadWeight < 0 || math.IsNaN(c.DecodeLoadWeight) || math.IsInf(c.DecodeLoadWeight, 0):
		return fmt.Errorf("%w: decodeLoadWeight %v is not a finite non-negative number", ErrInvalidConfig, c.DecodeLoadWeight)
	}
	return nil
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.NonCachedTokens == 0 {
		c.NonCachedTokens = DefaultNonCachedTokens
	}
	if c.DecodeQueueRequests == 0 {
		c.DecodeQueueRequests = DefaultDecodeQueueRequests
	}
	if c.DecodeCacheWeight == 0 {
		c.DecodeCacheWeight = DefaultDecodeCacheWeight
	}
	if c.DecodeLoadWeight == 0 {
		c.DecodeLoadWeight = DefaultDecodeLoadWeight
	}
	return c
}

// LoadConfig reads a Config from JSON (unknown keys are rejected) and
// validates it.
func LoadConfig(r io.Reader) (Config, error) {
	var c Config
	if err := jsonconf.Decode(r, &c); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return c, c.Validate()
}

type configFields Config

// UnmarshalJSON decodes c, rejecting unknown keys.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c.
func (c Config) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(configFields(c)) }
