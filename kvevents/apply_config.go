package kvevents

import (
	"github.com/kvroute/kvroute/telemetry"
)

// ApplierConfig configures an Applier.
type ApplierConfig struct {
	// Model is the model name used when Apply is called with an empty one
	// (for example an endpoint publishing on vLLM's default empty topic).
	Model string `json:"model"`
	// LoRANames maps vLLM's integer lora_id to the adapter name, for engines
	// that send lora_id without lora_name (vLLM 0.9 and other releases before
	// lora_name existed). A store of an adapter is keyed under the adapter's
	// name, never under the base model: without lora_name, a typed LoRA extra
	// key or an entry here, it is skipped and counted
	// (stores_skipped_total{reason="lora_unnamed"}), because keying it under
	// the base model would make base-model requests match adapter blocks.
	LoRANames map[int64]string `json:"loraNames,omitempty"`
	// MaxResizedBlocksPerEndpoint bounds, per endpoint, the engine blocks
	// the Applier remembers for an engine whose block size is not a
	// multiple of the index's (their chain state; see apply_resize.go).
	// 0 means DefaultMaxResizedBlocksPerEndpoint.
	MaxResizedBlocksPerEndpoint int `json:"maxResizedBlocksPerEndpoint,omitempty"`
	// SlidingWindow is the sliding window in tokens of the engines'
	// sliding-window cache groups, for events that do not carry
	// kv_cache_spec_sliding_window (0: such stores are skipped, reason
	// "no_sliding_window"). See apply_groups.go.
	SlidingWindow int `json:"slidingWindow,omitempty"`
}

// Options are the injected dependencies of a Pool or an Applier; the zero
// value is valid.
type Options struct {
	// Set is the observability bundle (see package telemetry):
	//   Registerer receives the component's metrics; nil registers none.
	//   Logger receives state changes and debug logs for dropped events;
	//   nil discards.
	//   TracerProvider, for a Pool, traces a sample of the KV-event
	//   messages (spans events_receive, events_process, events_decode)
	//   when PoolConfig.Tracing enables it; nil traces nothing at no cost.
	//   Clock, for a Pool, is the time source of its streams: when a phase
	//   or readiness state began (EndpointStatus.Since), and its timers,
	//   its sockets' heartbeats and its replay client's timeout and
	//   backoff; nil is the wall clock (telemetry.Wall).
	telemetry.Set
	// metrics, for the Pool's own Applier, is the Applier's part of the
	// Pool's metrics (shared so each family is registered once); it takes
	// precedence over Registerer.
	metrics *applyMetrics
	// Matcher, for a Pool, decides from an endpoint's labels whether it is
	// subscribed (nil subscribes every endpoint): a Kubernetes
	// labels.Selector's Matches, for instance, or the matcher a kvroute
	// Router builds from its events.selector.
	Matcher func(labels map[string]string) bool
}
