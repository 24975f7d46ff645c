package simengine

import "time"

// EventType names a KV-cache event, as vLLM's tag strings do.
type EventType uint8

// The three vLLM KV-cache events.
const (
	BlockStored      EventType = iota + 1 // newly cached full blocks
	BlockRemoved                          // an evicted block hash
	AllBlocksCleared                      // a successful prefix-cache reset
)

// String returns vLLM's tag string for the event type.
func (t EventType) String() string {
	switch t {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return "Unknown"
}

// Medium and cache-group metadata the engine puts on its events: a
// full-attention group 0 on GPU, like a plain dense model on vLLM (the
// hybrid mode adds a sliding-window and a Mamba group, numbered as
// HybridConfig.GroupOrder says; hybrid.go).
const (
	MediumGPU         = "GPU"
	KindFullAttention = "full_attention"
)

// Event is one KV-cache event with the fields of vLLM's BlockStored,
// BlockRemoved and AllBlocksCleared structs. A publisher maps it onto the wire
// format (wire.Batch); the engine itself knows nothing about msgpack.
type Event struct {
	Type EventType
	// BlockHashes are event-form hashes (Digest.U64): for BlockStored one per new
	// full block, for BlockRemoved exactly one (vLLM sends one removal per hash).
	BlockHashes []uint64
	// ParentHash is the event-form hash of the block before the first stored
	// block; HasParent is false when the first stored block is block 0.
	ParentHash uint64
	HasParent  bool
	// TokenIDs of the stored blocks (len = len(BlockHashes) * BlockSize); they
	// include generated tokens when decode filled a block.
	TokenIDs  []uint32
	BlockSize int
	// LoRAID and LoRAName identify the adapter (0 and "" without one).
	LoRAID   int
	LoRAName string
	// Medium is always MediumGPU for stores and removals.
	Medium string
	// ExtraKeys has one entry per block hash: nil for a block without extra keys,
	// else the keys that went into its hash (LoRA name on every block, then the
	// multimodal items the block overlaps, then the cache salt on block 0), as
	// vLLM's extra_keys.
	ExtraKeys [][]ExtraKey
	// GroupIdx is the KV-cache group: 0, the full-attention group, unless
	// the hybrid mode runs (then each group's number follows
	// HybridConfig.GroupOrder, by default full attention 0, the window 1
	// and Mamba 2; every group's stores carry parent, tokens and extra
	// keys);
	// Kind its spec kind (KindFullAttention,
	// KindSlidingWindow or KindMamba on stores, "" on removals, as vLLM sets
	// it only on stores).
	GroupIdx int
	Kind     string
	// SlidingWindow is kv_cache_spec_sliding_window, the window in tokens of
	// a sliding-window group's stores (0 otherwise; hybrid.go).
	SlidingWindow int
}

// EventBatch is what one scheduler step (or one reset) produced, like vLLM's
// KVEventBatch. Time is the engine clock at the end of the step.
type EventBatch struct {
	Time   time.Time
	Events []Event
}

// EventSink receives event batches in order, one call per step that produced
// events. It is called from the goroutine that advances the engine, never
// concurrently for one engine, and owns the batch after the call. It must not
// call back into the engine.
type EventSink interface {
	PublishKVEvents(b EventBatch)
}

// EventSinkFunc adapts a function to EventSink.
type EventSinkFunc func(b EventBatch)

// PublishKVEvents calls f(b).
func (f EventSinkFunc) PublishKVEvents(b EventBatch) { f(b) }
