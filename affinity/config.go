package affinity

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/kvroute/kvroute/internal/jsonconf"
)

// Defaults of the llm-d router's prefix-cache-affinity-filter (throughput TTFT
// source), which kvroute keeps so that tuned deployments carry over.
const (
	// DefaultAffinityThreshold is the matched-score ratio from which an
	// endpoint counts as cache-warm.
	DefaultAffinityThreshold = 0.80
	// DefaultMaxTTFTPenalty is how much later the least-loaded warm endpoint
	// may start prefill than the least-loaded cold one before stickiness is
	// broken.
	DefaultMaxTTFTPenalty = 18 * time.Second
	// DefaultPeakPrefillThroughput is the measured prefill throughput of
	// Qwen3-32B on two H100s (vLLM, chunk 8192), in tokens per second.
	// Calibrate your own deployment with examples/calibrate.
	DefaultPeakPrefillThroughput = 15928.0
)

// MissingSignalPolicy says what the TTFT gate does when one side of its
// comparison (the sticky or the non-sticky candidates) has no endpoint with a
// known load signal.
type MissingSignalPolicy string

const (
	// KeepSticky keeps only the sticky candidates (the default). Breaking
	// stickiness throws away cache hits and makes a cold endpoint re-prefill
	// the whole shared prefix; the gate exists to react to measured overload,
	// and the absence of a measurement is not evidence of overload. Substituting
	// zero for the missing value instead (as the reference implementation did)
	// makes the gate fire always or never, depending on which side lacks data.
	KeepSticky MissingSignalPolicy = "keep_sticky"
	// Widen lets every candidate pass, leaving the choice to the load scorer.
	// It suits deployments whose load signal comes from an external source
	// that can go stale and that prefer spreading load when blind.
	Widen MissingSignalPolicy = "widen"
)

// Config configures a Filter. Start from DefaultConfig; the zero Config is not
// the default (a zero AffinityThreshold disables the filter and a zero
// MaxTTFTPenalty disables the gate).
//
// JSON keys are the json tags below. Unknown keys are an error. maxTTFTPenalty
// is a Go duration string ("18s", "1500ms"); a bare number is an error, since
// the llm-d filter's maxTTFTPenaltyMs counts milliseconds where kvroute's
// other durations used to count nanoseconds. Keys missing from the JSON keep
// the value the Config had before decoding, so decode into DefaultConfig() (as
// LoadConfig does) to get defaults for them.
type Config struct {
	// AffinityThreshold is the tier-weighted matched blocks / total blocks
	// ratio from which an endpoint is sticky, in [0, 1]; 0 disables the
	// filter. Default 0.80. A prompt cached entirely in the CPU tier (weight
	// 0.8 in kvindex) scores exactly 0.8 and is sticky at the default; the
	// comparison tolerates the float rounding of the weighted sum (a relative
	// 1e-9), so this holds for every prompt length.
	AffinityThreshold float64 `json:"affinityThreshold"`
	// ExplorationProbability is the probability, in [0, 1], that a request
	// skips the filter and every candidate passes. Default 0.
	ExplorationProbability float64 `json:"explorationProbability"`
	// MaxTTFTPenalty is the TTFT gate's tolerance, >= 0; 0 disables the gate
	// (always stick). Default 18 s.
	MaxTTFTPenalty time.Duration `json:"maxTTFTPenalty"`
	// PeakPrefillThroughput is the prefill throughput in tokens per second
	// used to turn in-flight tokens into an estimated TTFT; finite, >= 0, and
	// > 0 when MaxTTFTPenalty > 0. Default 15,928. See PeakPrefillThroughput
	// (the function) and examples/calibrate.
	PeakPrefillThroughput float64 `json:"peakPrefillThroughput"`
	// MissingSignalPolicy is KeepSticky (the default; "" means KeepSticky) or
	// Widen.
	MissingSignalPolicy MissingSignalPolicy `json:"missingSignalPolicy"`
	// IncludeRequestTokens adds each candidate's projected uncached tokens for
	// the current request to its estimate: (in-flight + request uncached) /
	// peak. The reference gate uses committed load only. Because a warm
	// endpoint has fewer uncached tokens for this request than a cold one,
	// the opt-in makes stickiness harder to break: the cold endpoint must also
	// pay for this request's full prefill. Default false.
	IncludeRequestTokens bool `json:"includeRequestTokens"`
}

// DefaultConfig returns the defaults of the llm-d router's
// prefix-cache-affinity-filter plugin: threshold 0.80, no exploration, an
// 18 s penalty at 15,928 tokens/s, keep sticky on a missing signal,
// committed load only.
func DefaultConfig() Config {
	return Config{
		AffinityThreshold:      DefaultAffinityThreshold,
		ExplorationProbability: 0,
		MaxTTFTPenalty:         DefaultMaxTTFTPenalty,
		PeakPrefillThroughput:  DefaultPeakPrefillThroughput,
		MissingSignalPolicy:    KeepSticky,
		IncludeRequestTokens:   false,
	}
}

// ErrInvalidConfig is wrapped by every error Validate and LoadConfig return
// for a configuration value that is out of range (test with errors.Is).
var ErrInvalidConfig = errors.New("affinity: invalid config")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// Validate reports the first out-of-range field, naming its JSON key.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.AffinityThreshold) || c.AffinityThreshold < 0 || c.AffinityThreshold > 1:
		return invalid("affinityThreshold must be in [0, 1] (0 disables the filter), got %v", c.AffinityThreshold)
	case math.IsNaN(c.ExplorationProbability) || c.ExplorationProbability < 0 || c.ExplorationProbability > 1:
		return invalid("explorationProbability must be in [0, 1], got %v", c.ExplorationProbability)
	case c.MaxTTFTPenalty < 0:
		return invalid("maxTTFTPenalty must be >= 0 (0 disables the TTFT gate), got %v", c.MaxTTFTPenalty)
	case math.IsNaN(c.PeakPrefillThroughput) || math.IsInf(c.PeakPrefillThroughput, 0) || c.PeakPrefillThroughput < 0:
		return invalid("peakPrefillThroughput must be a finite number >= 0 tokens/s, got %v", c.PeakPrefillThroughput)
	case c.MaxTTFTPenalty > 0 && c.PeakPrefillThroughput == 0:
		return invalid("peakPrefillThroughput must be > 0 when maxTTFTPenalty is > 0 (measure it with examples/calibrate, or set maxTTFTPenalty to 0 to disable the gate)")
	}
	switch c.MissingSignalPolicy {
	case "", KeepSticky, Widen:
	default:
		return invalid("missingSignalPolicy must be %q or %q, got %q", KeepSticky, Widen, c.MissingSignalPolicy)
	}
	return nil
}

// LoadConfig decodes a JSON object over DefaultConfig (keys that are absent
// keep their defaults), rejects unknown keys (naming their path), bare
// numbers as durations and trailing data, and validates the result.
func LoadConfig(r io.Reader) (Config, error) {
	cfg := DefaultConfig()
	if err := jsonconf.Decode(r, &cfg); err != nil {
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

// UnmarshalJSON decodes c strictly, wherever a Config is decoded: unknown
// keys are an error even when the surrounding decoder does not disallow
// them, and maxTTFTPenalty is a Go duration string. Keys not present keep
// their current value.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with maxTTFTPenalty as a Go duration string.
func (c Config) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(configFields(c))
}
