package admission

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/internal/jsonconf"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultFlow is the flow key of requests without a fairness ID.
	DefaultFlow = "default"
	// DefaultQueueTimeout is how long a request may wait in the queue when
	// neither its objective nor the request sets a deadline.
	DefaultQueueTimeout = 30 * time.Second
	// DefaultMaxQueuedRequests bounds the queue in requests.
	DefaultMaxQueuedRequests = 10000
	// DefaultMaxQueuedBytes bounds the queue in estimated prompt bytes.
	DefaultMaxQueuedBytes = 256 << 20
	// DefaultQuantum is deficit round robin's quantum in prompt tokens.
	DefaultQuantum = 2048
	// DefaultRecheck is the interval of the fallback re-check of a
	// non-empty queue.
	DefaultRecheck = 100 * time.Millisecond
	// DefaultSettle is how long an endpoint a queued request was released
	// to stays claimed unless its accounting moves first.
	DefaultSettle = 250 * time.Millisecond
	// DefaultRetryAfter is the Retry-After hint for shed requests.
	DefaultRetryAfter = time.Second
	// DefaultMaxPrefillBacklog is the own accounting's threshold: an
	// endpoint whose in-flight prefill tokens would take this long at its
	// peak prefill throughput is saturated.
	DefaultMaxPrefillBacklog = 2 * time.Second
)

// Fairness is how flows of one priority band share its dispatches.
type Fairness string

// The fairness policies.
const (
	// RoundRobin gives each flow of a band one request in turn.
	RoundRobin Fairness = "round_robin"
	// DeficitRoundRobin gives each flow of a band the same number of prompt
	// tokens in turn (Config.Quantum per round), so a flow of long prompts
	// does not take more prefill than a flow of short ones.
	DeficitRoundRobin Fairness = "deficit_round_robin"
)

// Ordering is the order of requests within one flow.
type Ordering string

// The orderings within a flow.
const (
	// FCFS dispatches a flow's requests in arrival order.
	FCFS Ordering = "fcfs"
	// EarliestDeadline dispatches the request whose queue deadline comes
	// first (arrival order among equal deadlines).
	EarliestDeadline Ordering = "earliest_deadline"
)

// Objective mirrors the Inference Extension's InferenceObjective: a name the
// client sends (header x-gateway-inference-objective) and the priority of
// its requests. A negative priority is sheddable.
type Objective struct {
	// Name is the objective's name as clients send it; required, unique.
	Name string `json:"name"`
	// Priority is the objective's band; higher dispatches first, negative
	// is sheddable.
	Priority int `json:"priority"`
	// QueueTimeout is how long the objective's requests may wait queued;
	// 0 means Config.QueueTimeout.
	QueueTimeout time.Duration `json:"queueTimeout"`
}

// Saturation configures kvroute's own saturation accounting (TokenDetector).
// An endpoint is saturated when its in-flight prefill tokens reach
// MaxPrefillBacklog × PeakPrefillThroughput (at least 1 token; a product
// beyond int64's range is clamped to math.MaxInt64, in effect no token
// threshold), or its open requests reach MaxOpenRequests when that is set.
type Saturation struct {
	// MaxPrefillBacklog is the prefill work, in time at peak throughput,
	// from which an endpoint is saturated; 0 means DefaultMaxPrefillBacklog,
	// negative turns the token threshold off.
	MaxPrefillBacklog time.Duration `json:"maxPrefillBacklog"`
	// PeakPrefillThroughput is the endpoints' calibrated prefill throughput
	// in tokens per second (the affinity filter's; see examples/calibrate);
	// 0 means affinity.DefaultPeakPrefillThroughput.
	PeakPrefillThroughput float64 `json:"peakPrefillThroughput"`
	// MaxOpenRequests saturates an endpoint with this many open requests
	// (dispatched, not done); 0 turns the concurrency threshold off.
	MaxOpenRequests int64 `json:"maxOpenRequests"`
}

// Config configures a Controller. The zero value is valid: every zero field
// takes its default; no objectives means every request has DefaultPriority.
// JSON keys are the json tags; durations are Go duration strings; unknown
// keys are an error (LoadConfig).
type Config struct {
	// Objectives is the objective → priority table.
	Objectives []Objective `json:"objectives"`
	// DefaultPriority is the priority of requests without an objective or
	// with one not in Objectives (counted as unknown).
	DefaultPriority int `json:"defaultPriority"`
	// DefaultFlow is the flow of requests without a fairness ID; "" means
	// DefaultFlow.
	DefaultFlow string `json:"defaultFlow"`
	// QueueTimeout is how long a request may wait queued when neither its
	// objective nor the request sets it; 0 means DefaultQueueTimeout.
	QueueTimeout time.Duration `json:"queueTimeout"`
	// Fairness is RoundRobin ("" means it) or DeficitRoundRobin.
	Fairness Fairness `json:"fairness"`
	// Quantum is deficit round robin's per-round share in prompt tokens;
	// 0 means DefaultQuantum.
	Quantum int64 `json:"quantum"`
	// Ordering is FCFS ("" means it) or EarliestDeadline.
	Ordering Ordering `json:"ordering"`
	// MaxQueuedRequests bounds the queue; 0 means DefaultMaxQueuedRequests.
	MaxQueuedRequests int `json:"maxQueuedRequests"`
	// MaxQueuedBytes bounds the queue's estimated prompt bytes; 0 means
	// DefaultMaxQueuedBytes.
	MaxQueuedBytes int64 `json:"maxQueuedBytes"`
	// Recheck is the interval at which a non-empty queue re-checks
	// saturation when nothing wakes it; 0 means DefaultRecheck.
	Recheck time.Duration `json:"recheck"`
	// Settle is how long an endpoint stays claimed by a request released
	// from the queue, unless its accounting moves first; 0 means
	// DefaultSettle.
	Settle time.Duration `json:"settle"`
	// RetryAfter is the retry hint given with shed requests; 0 means
	// DefaultRetryAfter.
	RetryAfter time.Duration `json:"retryAfter"`
	// Saturation configures kvroute's own saturation accounting.
	Saturation Saturation `json:"saturation"`
	// Headroom configures the per-endpoint dispatch gate (Controller.Hold).
	Headroom Headroom `json:"headroom"`
}

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("admission: invalid config")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// Validate reports the first invalid field, naming its JSON key.
func (c Config) Validate() error {
	seen := make(map[string]bool, len(c.Objectives))
	for i, o := range c.Objectives {
		switch {
		case o.Name == "":
			return invalid("objectives[%d].name is empty", i)
		case len(o.Name) > maxNameLen:
			return invalid("objectives[%d].name is longer than %d bytes", i, maxNameLen)
		case seen[o.Name]:
			return invalid("objectives[%d].name %q appears twice", i, o.Name)
		case o.QueueTimeout < 0:
			return invalid("objectives[%d].queueTimeout must be >= 0, got %v", i, o.QueueTimeout)
		}
		seen[o.Name] = true
	}
	switch {
	case len(c.DefaultFlow) > maxNameLen:
		return invalid("defaultFlow is longer than %d bytes", maxNameLen)
	case c.QueueTimeout < 0:
		return invalid("queueTimeout must be >= 0, got %v", c.QueueTimeout)
	case c.Fairness != "" && c.Fairness != RoundRobin && c.Fairness != DeficitRoundRobin:
		return invalid("fairness must be %q or %q, got %q", RoundRobin, DeficitRoundRobin, c.Fairness)
	case c.Quantum < 0:
		return invalid("quantum must be >= 0 tokens, got %d", c.Quantum)
	case c.Ordering != "" && c.Ordering != FCFS && c.Ordering != EarliestDeadline:
		return invalid("ordering must be %q or %q, got %q", FCFS, EarliestDeadline, c.Ordering)
	case c.MaxQueuedRequests < 0:
		return invalid("maxQueuedRequests must be >= 0, got %d", c.MaxQueuedRequests)
	case c.MaxQueuedBytes < 0:
		return invalid("maxQueuedBytes must be >= 0, got %d", c.MaxQueuedBytes)
	case c.Recheck < 0:
		return invalid("recheck must be >= 0, got %v", c.Recheck)
	case c.Settle < 0:
		return invalid("settle must be >= 0, got %v", c.Settle)
	case c.RetryAfter < 0:
		return invalid("retryAfter must be >= 0, got %v", c.RetryAfter)
	case math.IsNaN(c.Saturation.PeakPrefillThroughput) || math.IsInf(c.Saturation.PeakPrefillThroughput, 0) || c.Saturation.PeakPrefillThroughput < 0:
		return invalid("saturation.peakPrefillThroughput must be a finite number >= 0, got %v", c.Saturation.PeakPrefillThroughput)
	case math.IsNaN(c.Headroom.MaxKVCache) || c.Headroom.MaxKVCache > 1:
		return invalid("headroom.maxKVCache must be a number <= 1, got %v", c.Headroom.MaxKVCache)
	case c.Headroom.MaxHeld < 0:
		return invalid("headroom.maxHeld must be >= 0, got %d", c.Headroom.MaxHeld)
	case c.Saturation.MaxOpenRequests < 0:
		return invalid("saturation.maxOpenRequests must be >= 0, got %d", c.Saturation.MaxOpenRequests)
	}
	return nil
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.DefaultFlow == "" {
		c.DefaultFlow = DefaultFlow
	}
	if c.QueueTimeout == 0 {
		c.QueueTimeout = DefaultQueueTimeout
	}
	if c.Fairness == "" {
		c.Fairness = RoundRobin
	}
	if c.Quantum == 0 {
		c.Quantum = DefaultQuantum
	}
	if c.Ordering == "" {
		c.Ordering = FCFS
	}
	if c.MaxQueuedRequests == 0 {
		c.MaxQueuedRequests = DefaultMaxQueuedRequests
	}
	if c.MaxQueuedBytes == 0 {
		c.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if c.Recheck == 0 {
		c.Recheck = DefaultRecheck
	}
	if c.Settle == 0 {
		c.Settle = DefaultSettle
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.Headroom.MaxWaiting == 0 {
		c.Headroom.MaxWaiting = DefaultHeadroomWaiting
	}
	if c.Headroom.MaxKVCache == 0 {
		c.Headroom.MaxKVCache = DefaultHeadroomKVCache
	}
	if c.Headroom.MaxHeld == 0 {
		c.Headroom.MaxHeld = DefaultMaxHeld
	}
	if c.Saturation.MaxPrefillBacklog == 0 {
		c.Saturation.MaxPrefillBacklog = DefaultMaxPrefillBacklog
	}
	if c.Saturation.PeakPrefillThroughput == 0 {
		c.Saturation.PeakPrefillThroughput = affinity.DefaultPeakPrefillThroughput
	}
	return c
}

// LoadConfig decodes a JSON Config strictly (unknown keys and bare numbers
// as durations are errors naming their path) and validates it. Absent keys
// stay zero, which New reads as the defaults.
func LoadConfig(r io.Reader) (Config, error) {
	return jsonconf.Load(r, Config{}, jsonconf.Under(ErrInvalidConfig), Config.Validate)
}

// configFields is Config without its methods, so that decoding it does not
// recurse into Config.UnmarshalJSON.
type configFields Config

// UnmarshalJSON decodes c strictly wherever a Config is decoded (alone, or
// as the admission section of a gateway configuration).
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with its durations as Go duration strings.
func (c Config) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(configFields(c))
}
