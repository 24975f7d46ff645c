package kvevents

import "github.com/kvroute/kvroute/internal/jsonconf"

// poolConfigFields is PoolConfig without its methods, so that decoding it does not
// recurse into PoolConfig.UnmarshalJSON.
type poolConfigFields PoolConfig

// UnmarshalJSON decodes c strictly wherever a PoolConfig is decoded: unknown keys
// are an error naming their path, durations are Go duration strings ("2s",
// "250ms") and a bare number for one is an error. Keys not present keep
// their current value.
func (c *PoolConfig) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*poolConfigFields)(c))
}

// MarshalJSON encodes c with its durations as Go duration strings, the form
// UnmarshalJSON reads.
func (c PoolConfig) MarshalJSON() ([]byte, error) {
	return jsonconf.Marshal(poolConfigFields(c))
}

// The pool defaults that a configuration composed around a PoolConfig
// (kvroute.DefaultConfig, the example binaries' flags) shows, exported so
// that it shows them without declaring them again. NewPool applies every
// default itself: a zero field means the default.
const (
	// DefaultEventsPort is PoolConfig.EventsPort's default: vLLM's KV-event
	// PUB port.
	DefaultEventsPort = defaultEventsPort
	// DefaultReplayPort is PoolConfig.ReplayPort's default: vLLM's replay
	// ROUTER port.
	DefaultReplayPort = defaultReplayPort
	// DefaultConcurrency is PoolConfig.Concurrency's default: the workers
	// applying events to the index.
	DefaultConcurrency = defaultConcurrency
	// DefaultIdleTimeout is PoolConfig.IdleTimeout's default: how long a
	// subscription without heartbeats may stay silent before it is recreated.
	DefaultIdleTimeout = defaultIdleTimeout
)
