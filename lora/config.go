package lora

import (
	"fmt"
	"io"
	"math"

	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/internal/jsonconf"
)

// Scores of a candidate by its engine's state for the request's adapter,
// before Config.Weight. An endpoint running the adapter serves at once; one
// with requests of the adapter waiting has it about to run (or queued for a
// slot); one that has neither must load it first, and when its slots are
// full (max_lora reached) its batch must drain an adapter before the new
// one runs, so it pays Config.CapPenalty on top.
const (
	// ScoreRunning is the score of an endpoint whose running batch uses
	// the adapter.
	ScoreRunning = 1.0
	// ScoreWaiting is the score of an endpoint with requests of the
	// adapter in its waiting queue.
	ScoreWaiting = 0.7
	// ScoreLoad is the score of an endpoint that would load the adapter,
	// and the neutral score of an endpoint whose state is unknown (never
	// scraped, failed or stale).
	ScoreLoad = 0.4
	// HashSpread is the width of the rendezvous-hash spread added to the
	// scores of endpoints that would load the adapter (and of unknown
	// ones): each gets hash(adapter, endpoint ID) × HashSpread, so that
	// every router replica, even before any engine reports, sends a new
	// adapter to the same engine (Dynamo places adapters by rendezvous
	// hashing the same way), while any reported state still outweighs it.
	HashSpread = 0.05
)

// Defaults applied to zero Config fields.
const (
	// DefaultWeight is the scorer's weight in the router's sum of scores;
	// the token-load scorer's is kvroute.DefaultLoadWeight, 1.
	DefaultWeight = 1.0
	// DefaultCapPenalty is subtracted from ScoreLoad for an endpoint whose
	// adapters already fill its max_lora slots.
	DefaultCapPenalty = 0.3
)

// Config configures a Scorer. The zero value means the defaults above; in
// JSON unknown keys are errors.
type Config struct {
	// Weight is the scorer's weight in the router's sum of scores (default
	// 1). With the token-load scorer at its default weight, an endpoint
	// running the adapter outweighs one that would load it until the
	// running one carries (ScoreRunning-ScoreLoad)×Weight of the queue
	// threshold's worth of tokens more.
	Weight float64 `json:"weight"`
	// CapPenalty is what an endpoint at its max_lora cap loses below
	// ScoreLoad (default 0.3, at most ScoreLoad; negative means 0, no
	// penalty).
	CapPenalty float64 `json:"capPenalty"`
	// MaxWaiting: an endpoint whose engine reports at least this many
	// waiting requests (vllm:num_requests_waiting) loses its bonus for
	// running or queueing the adapter and scores as one that would load
	// it, so that a hot adapter spills onto a second engine instead of
	// queueing behind one (default enginemetrics.DefaultWaitingThreshold,
	// 5, the saturation threshold; negative: never).
	MaxWaiting int `json:"maxWaiting"`
}

// withDefaults fills zero fields and validates the result.
func (c Config) withDefaults() (Config, error) {
	if c.Weight == 0 {
		c.Weight = DefaultWeight
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = enginemetrics.DefaultWaitingThreshold
	}
	switch {
	case c.CapPenalty == 0:
		c.CapPenalty = DefaultCapPenalty
	case c.CapPenalty < 0:
		c.CapPenalty = 0
	}
	switch {
	case math.IsNaN(c.Weight) || math.IsInf(c.Weight, 0) || c.Weight < 0:
		return c, fmt.Errorf("lora: weight %v is not a finite non-negative number", c.Weight)
	case math.IsNaN(c.CapPenalty) || c.CapPenalty > ScoreLoad:
		return c, fmt.Errorf("lora: capPenalty %v is more than %v", c.CapPenalty, ScoreLoad)
	}
	return c, nil
}

// Validate reports the first invalid setting of c, naming its key.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// LoadConfig decodes a JSON Config over the zero value (unknown keys are an
// error naming their path) and validates it.
func LoadConfig(r io.Reader) (Config, error) {
	return jsonconf.Load(r, Config{}, jsonconf.Prefixed("lora: config"), Config.Validate)
}

// configFields is Config without its methods, so that decoding it does not
// recurse into UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c strictly wherever it is decoded (alone or as a
// section of a larger configuration): unknown keys are an error naming
// their path.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c in the form UnmarshalJSON reads.
func (c Config) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(configFields(c)) }
