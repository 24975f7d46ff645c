package kvindex

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kvroute/kvroute/telemetry"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultSpeculativeTTL is how long a speculative entry counts when
	// Speculate gets no TTL: the usual gap between a routing decision and
	// the engine's BlockStored event, with margin.
	DefaultSpeculativeTTL = 2 * time.Second
	// DefaultMaxBlocksPerEndpoint bounds each endpoint's blocks: 4 Mi blocks
	// of 64 tokens is 268 M tokens, above any single engine's KV capacity.
	DefaultMaxBlocksPerEndpoint = 1 << 22
	// DefaultSweepInterval is how often expired speculative entries are
	// removed in the background.
	DefaultSweepInterval = time.Second
	// DefaultMaxBytes bounds the index's accounted memory: 8 GiB is about
	// 170 M (block, endpoint) memberships at 50 bytes each, e.g. 40 engines
	// each holding the default MaxBlocksPerEndpoint.
	DefaultMaxBytes int64 = 8 << 30
)

// Config configures an Index. The zero Config is valid and means the
// defaults; it is JSON-taggable so composed configurations can embed it.
type Config struct {
	// BlockSize is the number of tokens per block (default 64), the size
	// of the keys a router computes for a request. Engines may use another
	// size: kvevents' Applier re-chunks their events at this one (Store
	// itself takes only events of this size, see ErrBlockSizeMismatch), and
	// Match rounds their matches down to whole engine blocks
	// (SetEngineBlockSize).
	BlockSize int `json:"blockSize"`
	// TierWeights weighs a matched block by the tier holding it (the
	// highest weight wins when several tiers hold it). Entries override the
	// defaults {"gpu": 1, "cpu": 0.8}; tiers without an entry weigh 1.0,
	// except "cpu_pinned" and "disk", which fall back to the "cpu" and
	// "storage" entries when those are set. Weights must be finite and >= 0.
	TierWeights map[string]float64 `json:"tierWeights"`
	// SpeculativeWeight weighs blocks held only speculatively (default 1.0;
	// zero means the default).
	SpeculativeWeight float64 `json:"speculativeWeight"`
	// SpeculativeTTL is used when Speculate is called with ttl <= 0
	// (default 2s).
	SpeculativeTTL time.Duration `json:"speculativeTTL"`
	// MaxBlocksPerEndpoint bounds the engine blocks indexed per endpoint;
	// beyond it the endpoint's oldest stored blocks are evicted (counted as
	// reason "capacity"). Default 1<<22.
	MaxBlocksPerEndpoint int `json:"maxBlocksPerEndpoint"`
	// SweepInterval is the period of the background sweep of expired
	// speculative entries (default 1s). A negative value disables the
	// sweeper goroutine; expiry is still enforced by Match.
	SweepInterval time.Duration `json:"sweepInterval"`
	// MaxBytes bounds the index's memory in bytes, over all endpoints
	// (default DefaultMaxBytes, 8 GiB; zero means the default, negative is
	// an error). The index accounts a fixed cost per membership, engine-hash
	// entry, shared engine-hash pair, complex side-table entry and
	// speculative entry (see
	// Stats.Bytes). When a Store or Speculate leaves more than MaxBytes
	// accounted, the endpoint holding the most accounted bytes evicts its
	// oldest stored blocks (counted as reason "memory") until the index is
	// back under the bound, so an endpoint flooding stores evicts its own
	// blocks, not another endpoint's, while it is the largest.
	MaxBytes int64 `json:"maxBytes"`
}

// Options are an Index's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the observability bundle (registerer, logger, tracer
	// provider, clock; see package telemetry):
	//   Registerer receives the index metrics; nil registers nothing.
	//   Clock is the clock of speculative expiry and of the sweeper's
	//   period; nil is the wall clock.
	//   The routing simulation passes its virtual clock.
	telemetry.Set
}

// Validate reports the first field New would refuse, naming its JSON key
// (a negative size, TTL or byte bound, a tier weight that is negative or
// not finite, a tier name that is not lower-case), so that a configuration
// that embeds Config can refuse it where it is read. Zero fields are valid:
// they mean the defaults.
func (cfg Config) Validate() error {
	switch {
	case cfg.BlockSize < 0:
		return fmt.Errorf("blockSize must be positive, got %d", cfg.BlockSize)
	case cfg.SpeculativeWeight < 0 || math.IsNaN(cfg.SpeculativeWeight) || math.IsInf(cfg.SpeculativeWeight, 0):
		return fmt.Errorf("speculativeWeight must be finite and >= 0, got %v", cfg.SpeculativeWeight)
	case cfg.SpeculativeTTL < 0:
		return fmt.Errorf("speculativeTTL must be >= 0, got %v", cfg.SpeculativeTTL)
	case cfg.MaxBlocksPerEndpoint < 0:
		return fmt.Errorf("maxBlocksPerEndpoint must be >= 0, got %d", cfg.MaxBlocksPerEndpoint)
	case cfg.MaxBytes < 0:
		return fmt.Errorf("maxBytes must be >= 0 (0 means the default %d), got %d", DefaultMaxBytes, cfg.MaxBytes)
	}
	for name, w := range cfg.TierWeights {
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return fmt.Errorf("tierWeights[%q] must be finite and >= 0, got %v", name, w)
		}
		if name != normTier(name) {
			return fmt.Errorf("tierWeights key %q must be lower-case and non-empty", name)
		}
	}
	return nil
}

// withDefaults returns cfg with zero fields replaced by defaults, or
// Validate's error.
func (cfg Config) withDefaults() (Config, error) {
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("kvindex: %w", err)
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	if cfg.SpeculativeWeight == 0 {
		cfg.SpeculativeWeight = 1
	}
	if cfg.SpeculativeTTL == 0 {
		cfg.SpeculativeTTL = DefaultSpeculativeTTL
	}
	if cfg.MaxBlocksPerEndpoint == 0 {
		cfg.MaxBlocksPerEndpoint = DefaultMaxBlocksPerEndpoint
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	return cfg, nil
}

// Tier classes, as reported in EndpointMatch.
const (
	classGPU = 1 << iota
	classCPU
	classStorage
	classOther
)

// tierTable interns tier names into the small IDs stored in memberships and
// precomputes what Match needs per tier mask. Tier 0 is always "gpu".
type tierTable struct {
	names   []string               // by tier ID; at most maxTiers
	weights [maxTiers]float64      // by tier ID
	classes [maxTiers]uint8        // by tier ID
	maxW    [1 << maxTiers]float64 // highest weight per tier mask
	clsOf   [1 << maxTiers]uint8   // union of classes per tier mask
	cfg     map[string]float64
}

// normTier lower-cases an engine medium and maps "" to "gpu" (vLLM and
// SGLang events without a medium are GPU events).
func normTier(s string) string {
	if s == "" {
		return "gpu"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + ('a' - 'A')
				}
			}
			return string(b)
		}
	}
	return s
}

// otherTier is the tier of every engine medium kvroute does not know and
// Config.TierWeights does not name (Index.tierID).
const otherTier = "other"

func newTierTable(weights map[string]float64) *tierTable {
	t := &tierTable{cfg: weights}
	for _, n := range []string{"gpu", "cpu", "storage"} {
		t.add(n)
	}
	return t
}

// add registers a tier name and refreshes the per-mask tables. Tables are
// copy-on-write: callers add to a clone under the index's tier lock and then
// publish it, so Match always reads a complete table.
func (t *tierTable) add(name string) uint8 {
	id := uint8(len(t.names))
	t.names = append(t.names, name)
	t.weights[id] = tierWeight(t.cfg, name)
	t.classes[id] = tierClass(name)
	for mask := 1; mask < 1<<maxTiers; mask++ {
		if mask&(1<<id) == 0 {
			continue
		}
		t.maxW[mask] = max(t.maxW[mask], t.weights[id])
		t.clsOf[mask] |= t.classes[id]
	}
	return id
}

// clone returns a copy of t that add may modify.
func (t *tierTable) clone() *tierTable {
	c := *t
	c.names = append([]string(nil), t.names...)
	return &c
}

// lookup returns the ID of a tier name, compared case-insensitively ("" is
// "gpu") so that engine media such as "GPU" need no allocation.
func (t *tierTable) lookup(name string) (uint8, bool) {
	if name == "" {
		return 0, true
	}
	for i, n := range t.names {
		if len(n) == len(name) && strings.EqualFold(n, name) {
			return uint8(i), true
		}
	}
	return 0, false
}

func tierClass(name string) uint8 {
	switch name {
	case "gpu":
		return classGPU
	case "cpu", "cpu_pinned":
		return classCPU
	case "storage", "disk":
		return classStorage
	}
	return classOther
}

func tierWeight(cfg map[string]float64, name string) float64 {
	if w, ok := cfg[name]; ok {
		return w
	}
	alias := ""
	switch name {
	case "cpu_pinned":
		alias = "cpu"
	case "disk":
		alias = "storage"
	}
	if w, ok := cfg[alias]; ok && alias != "" {
		return w
	}
	if name == "cpu" || name == "cpu_pinned" {
		return 0.8
	}
	return 1
}
