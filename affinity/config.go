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
	// ChatCrowdingRatio is the crowding ratio kvroute's routing study
	// measured on multi-turn chat, where it keeps conversations' histories
	// cached.
	ChatCrowdingRatio = 1.5
	// DefaultCrowdingRatio is the crowding rule's ratio by default
	// (Config.CrowdingRatio): ChatCrowdingRatio, the rule on, bounded by
	// DefaultCrowdingMaxExtraPrefill.
	DefaultCrowdingRatio = ChatCrowdingRatio
	// ChatCrowdingMaxExtraPrefill is the bound on the crowding rule's extra
	// prefill that kvroute's routing study measured with ChatCrowdingRatio
	// (Config.CrowdingMaxExtraPrefill): 150 ms of prefill. It keeps the
	// rule's moves of conversations whose histories are short to
	// re-prefill and stops those that re-prefill a long shared context.
	ChatCrowdingMaxExtraPrefill = 150 * time.Millisecond
	// DefaultCrowdingMaxExtraPrefill is Config.CrowdingMaxExtraPrefill by
	// default: ChatCrowdingMaxExtraPrefill.
	DefaultCrowdingMaxExtraPrefill = ChatCrowdingMaxExtraPrefill
	// DefaultCrowdingUnboundRatio is Config.CrowdingUnboundRatio by
	// default: the bound on the crowding rule's extra prefill is lifted
	// when the warm endpoints' fewest open requests + 1 reach 16 times the
	// others' fewest + 1. kvroute's routing study measured it on zipf-drift
	// at 1.25× load, where a hot group's engine otherwise ran out of KV
	// blocks (on that run ratios 8 to 16 did alike, 20 less, 30 nothing);
	// 16 changes the fewest runs of the other workloads.
	DefaultCrowdingUnboundRatio = 16.0
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

// Config configures a Filter. The zero Config means the defaults (those of
// DefaultConfig), applied by New: every field left at its zero value takes
// its default. The two settings whose zero is a meaningful setting of its
// own (a threshold of 0 disables the filter, a penalty of 0 disables the
// gate) are pointers, nil meaning the default, as in Kubernetes API types.
//
// JSON keys are the json tags below. Unknown keys are an error. maxTTFTPenalty
// is a Go duration string ("18s", "1500ms"); a bare number is an error, since
// the llm-d filter's maxTTFTPenaltyMs counts milliseconds where kvroute's
// other durations used to count nanoseconds. An absent key keeps the value
// the Config had before decoding (LoadConfig decodes over DefaultConfig, so
// that the result shows every default).
type Config struct {
	// AffinityThreshold is the tier-weighted matched blocks / total blocks
	// ratio from which an endpoint is sticky, in [0, 1]; 0 disables the
	// filter. Default 0.80 (DefaultAffinityThreshold); nil means the default.
	// A prompt cached entirely in the CPU tier (weight 0.8 in kvindex)
	// scores exactly 0.8 and is sticky at the default; the comparison
	// tolerates the float rounding of the weighted sum (a relative 1e-9), so
	// this holds for every prompt length.
	AffinityThreshold *float64 `json:"affinityThreshold"`
	// ExplorationProbability is the probability, in [0, 1], that a request
	// skips the filter and every candidate passes. Default 0.
	ExplorationProbability float64 `json:"explorationProbability"`
	// MaxTTFTPenalty is the TTFT gate's tolerance, >= 0; 0 disables the gate
	// (load never breaks stickiness; the crowding rule, CrowdingRatio, still
	// applies). Default 18 s (DefaultMaxTTFTPenalty); nil means the default.
	MaxTTFTPenalty *time.Duration `json:"maxTTFTPenalty"`
	// PeakPrefillThroughput is the prefill throughput in tokens per second
	// used to turn in-flight tokens into an estimated TTFT; finite and >= 0.
	// Default 15,928 (DefaultPeakPrefillThroughput); zero means the default.
	// See PeakPrefillThroughput (the function) and examples/calibrate.
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
	// CrowdingRatio is the crowding rule's ratio, finite and >= 0; 0
	// disables the rule. A candidate's crowding cost is (this request's
	// uncached tokens on it + 1) × (its open requests + 1). When the least
	// cost among the non-sticky candidates (within CrowdingMaxExtraPrefill)
	// is below CrowdingRatio times the least among the sticky ones, the
	// sticky endpoints are crowded with open requests, whose growing KV use
	// evicts the prefixes they hold, and only the non-sticky candidates of
	// least cost pass (OutcomeCrowded). A conversation then leaves an
	// engine crowded with streaming requests while its history is still
	// short to re-prefill, and the fleet's cache room stays even. Only
	// candidates with a known load count. Default DefaultCrowdingRatio (1.5;
	// nil means the default).
	CrowdingRatio *float64 `json:"crowdingRatio"`
	// CrowdingMaxExtraPrefill bounds what the crowding rule may add to the
	// moved request's own prefill: a non-sticky candidate is a destination
	// only when its uncached tokens exceed the warmest sticky candidate's by
	// at most CrowdingMaxExtraPrefill × PeakPrefillThroughput. 0 means no
	// bound; must be >= 0. Default DefaultCrowdingMaxExtraPrefill (150 ms;
	// nil means the default): without it, a request whose warm endpoint
	// holds a long shared context (a prefix group) is sometimes moved at low
	// load, where an idle engine's product is smaller, and re-prefills that
	// context at the cost of its own first token.
	CrowdingMaxExtraPrefill *time.Duration `json:"crowdingMaxExtraPrefill"`
	// CrowdingUnboundRatio lifts CrowdingMaxExtraPrefill when the crowding
	// is severe: when the sticky side's fewest open requests + 1 reach
	// CrowdingUnboundRatio times the non-sticky side's fewest + 1, any
	// non-sticky candidate may be the crowding rule's destination, whatever
	// it must re-prefill. An engine that many requests stream on runs out
	// of KV blocks and preempts them (its requests' decode-phase KV use,
	// which neither the TTFT gate's in-flight prefill nor the bound sees);
	// re-prefilling a long shared context elsewhere is then the lesser cost.
	// Finite and >= 0; 0 never lifts the bound. Default
	// DefaultCrowdingUnboundRatio (nil means the default).
	CrowdingUnboundRatio *float64 `json:"crowdingUnboundRatio"`
}

// DefaultConfig shows the defaults a zero Config stands for, those of the
// llm-d router's prefix-cache-affinity-filter plugin: threshold 0.80, no
// exploration, an 18 s penalty at 15,928 tokens/s, keep sticky on a missing
// signal, committed load only.
func DefaultConfig() Config { return Config{}.WithDefaults() }

// WithDefaults returns c with every field left at its zero value (or nil)
// set to its default: the configuration a Filter built from c runs with
// (Filter.Config).
func (c Config) WithDefaults() Config {
	if c.AffinityThreshold == nil {
		c.AffinityThreshold = new(DefaultAffinityThreshold)
	}
	if c.MaxTTFTPenalty == nil {
		c.MaxTTFTPenalty = new(DefaultMaxTTFTPenalty)
	}
	if c.PeakPrefillThroughput == 0 {
		c.PeakPrefillThroughput = DefaultPeakPrefillThroughput
	}
	if c.MissingSignalPolicy == "" {
		c.MissingSignalPolicy = KeepSticky
	}
	if c.CrowdingRatio == nil {
		c.CrowdingRatio = new(DefaultCrowdingRatio)
	}
	if c.CrowdingMaxExtraPrefill == nil {
		c.CrowdingMaxExtraPrefill = new(DefaultCrowdingMaxExtraPrefill)
	}
	if c.CrowdingUnboundRatio == nil {
		c.CrowdingUnboundRatio = new(DefaultCrowdingUnboundRatio)
	}
	return c
}

// ErrInvalidConfig is wrapped by every error Validate and LoadConfig return
// for a configuration value that is out of range (test with errors.Is).
var ErrInvalidConfig = errors.New("affinity: invalid config")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// Validate reports the first out-of-range field, naming its JSON key.
func (c Config) Validate() error {
	switch th := c.AffinityThreshold; {
	case th != nil && (math.IsNaN(*th) || *th < 0 || *th > 1):
		return invalid("affinityThreshold must be in [0, 1] (0 disables the filter), got %v", *th)
	case math.IsNaN(c.ExplorationProbability) || c.ExplorationProbability < 0 || c.ExplorationProbability > 1:
		return invalid("explorationProbability must be in [0, 1], got %v", c.ExplorationProbability)
	case c.MaxTTFTPenalty != nil && *c.MaxTTFTPenalty < 0:
		return invalid("maxTTFTPenalty must be >= 0 (0 disables the TTFT gate), got %v", *c.MaxTTFTPenalty)
	case math.IsNaN(c.PeakPrefillThroughput) || math.IsInf(c.PeakPrefillThroughput, 0) || c.PeakPrefillThroughput < 0:
		return invalid("peakPrefillThroughput must be a finite number >= 0 tokens/s (0 means the default %v), got %v", DefaultPeakPrefillThroughput, c.PeakPrefillThroughput)
	case c.CrowdingMaxExtraPrefill != nil && *c.CrowdingMaxExtraPrefill < 0:
		return invalid("crowdingMaxExtraPrefill must be >= 0 (0: no bound), got %v", *c.CrowdingMaxExtraPrefill)
	case c.CrowdingRatio != nil && (math.IsNaN(*c.CrowdingRatio) || math.IsInf(*c.CrowdingRatio, 0) || *c.CrowdingRatio < 0):
		return invalid("crowdingRatio must be a finite number >= 0 (0 disables the crowding rule), got %v", *c.CrowdingRatio)
	case c.CrowdingUnboundRatio != nil && (math.IsNaN(*c.CrowdingUnboundRatio) || math.IsInf(*c.CrowdingUnboundRatio, 0) || *c.CrowdingUnboundRatio < 0):
		return invalid("crowdingUnboundRatio must be a finite number >= 0 (0 never lifts crowdingMaxExtraPrefill), got %v", *c.CrowdingUnboundRatio)
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
	return jsonconf.Load(r, DefaultConfig(), jsonconf.Under(ErrInvalidConfig), Config.Validate)
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
