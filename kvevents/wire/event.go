package wire

// EventType identifies a KV-cache event. The engines tag events with the
// class name of the Python struct ("BlockStored", "BlockRemoved",
// "AllBlocksCleared"); the decoder maps the tag to an EventType so that the
// hot path switches on a small integer instead of comparing strings.
type EventType uint8

const (
	// EventUnknown is the zero EventType. The decoder never puts such an
	// event in Batch.Events: an event whose tag it does not know (or a map
	// event without a "type" key) is skipped and counted in
	// Batch.UnknownEvents, and Apply counts it (reason "unknown_event"); the
	// rest of the batch still applies. The encoder skips EventUnknown events.
	EventUnknown EventType = iota
	// EventBlockStored is a BlockStored event: blocks newly inserted into the
	// engine's prefix cache (SGLang's BlockStoredWithMetadata included).
	EventBlockStored
	// EventBlockRemoved is a BlockRemoved event: cached blocks evicted.
	EventBlockRemoved
	// EventAllBlocksCleared is an AllBlocksCleared event: the engine reset its
	// prefix cache, so every block of the endpoint is gone (every tier).
	EventAllBlocksCleared
)

// Wire tags of the event types, as vLLM and SGLang write them.
const (
	tagBlockStored      = "BlockStored"
	tagBlockRemoved     = "BlockRemoved"
	tagAllBlocksCleared = "AllBlocksCleared"
)

// String returns the wire tag of t, or "unknown".
func (t EventType) String() string {
	switch t {
	case EventBlockStored:
		return tagBlockStored
	case EventBlockRemoved:
		return tagBlockRemoved
	case EventAllBlocksCleared:
		return tagAllBlocksCleared
	}
	return "unknown"
}

// ExtraKeyKind says which wire form an extra key had. Engines send a string,
// an [identifier, offset] pair or bytes; other forms are skipped.
type ExtraKeyKind uint8

const (
	// ExtraKeyString is a plain string: a LoRA name, a cache salt, or (vLLM
	// v0.18+) a bare multimodal identifier.
	ExtraKeyString ExtraKeyKind = iota + 1
	// ExtraKeyMM is the 2-array [identifier, offset] multimodal form. Value
	// holds the identifier and Offset the offset of the item's first token
	// relative to the block start.
	ExtraKeyMM
	// ExtraKeyBytes is a bin value (vLLM's prompt-embedding SHA-256). Value
	// holds the bytes as lower-case hex, so that the key is printable and can
	// never be confused with the raw bytes of a string key.
	ExtraKeyBytes
	// ExtraKeyOpaque is any other form. Value holds the hex of the key's raw
	// msgpack encoding: it keeps the block's key distinct from blocks without
	// that key (so it never produces a false match) and lets the encoder write
	// the key back unchanged.
	ExtraKeyOpaque
	// ExtraKeyLoRA is a typed LoRA key ({"type":"lora","name":…}): Value is
	// the adapter name, which roots the block's key chain (it is never an
	// extra key of the index).
	ExtraKeyLoRA
	// ExtraKeySalt is a typed cache-salt key ({"type":"cache_salt",
	// "salt":…}): Value is the salt, keyed like an untyped salt string.
	ExtraKeySalt
)

// ExtraKey is one element of a block's extra_keys list.
type ExtraKey struct {
	Kind   ExtraKeyKind
	Value  string
	Offset int64 // ExtraKeyMM only
}

// Event is one decoded KV-cache event. A single struct covers every event
// type and every engine generation; fields an event type or a generation does
// not carry stay at their zero value. Optional wire fields that may be nil
// have a Has flag, because zero is a legal value for them.
//
// Slices are reused by the Decoder across calls: an Event is valid until the
// Batch that holds it is decoded into again.
type Event struct {
	Type EventType

	// Presence flags (grouped to keep the struct small):
	//   - HasParent: parent_block_hash was not nil (ParentHash is valid);
	//   - SignedHashes: a hash was written as a negative int (SGLang,
	//     v0.9-era vLLM); the vLLM encoders then write hashes as signed
	//     values (the SGLang encoder always does);
	//   - InvalidTokens: an element of token_ids was not an integer in
	//     [0, 2³²) (SGLang's EAGLE bigram pairs, TensorRT-LLM's multimodal
	//     digests); the element is skipped, InvalidTokenAt says where the
	//     first one was, and only the blocks before it can be applied
	//     (the rest is skipped with reason "invalid_tokens");
	//   - HasLoRAID, HasGroup, HasSlidingWindow: lora_id, group_idx and
	//     kv_cache_spec_sliding_window were present and not nil.
	HasParent, SignedHashes, InvalidTokens, HasLoRAID, HasGroup, HasSlidingWindow bool

	// BlockHashes are the event's block hashes normalised to uint64: a
	// msgpack int as its 64-bit two's-complement pattern (so SGLang's
	// negative int64 hashes keep their bits), a bin as the big-endian value
	// of its last 8 bytes (equal to vLLM's int mode; a shorter bin is
	// zero-padded on the left, and an empty bin is 0). The same rule applies
	// to ParentHash, so a parent always resolves to the value of the block it
	// names.
	BlockHashes []uint64
	// RawHashes is empty when every hash was an int. When at least one hash
	// was a bin it has one entry per hash: the bin bytes, or nil for an int.
	// The decoder copies the bytes; the encoder writes non-nil entries as bin.
	RawHashes [][]byte
	// ParentHash is the normalised parent_block_hash; valid when HasParent.
	ParentHash uint64
	// RawParent holds the parent's bytes when it was a bin (nil otherwise).
	RawParent []byte

	// TokenIDs are the tokens of the stored span (BlockStored only).
	TokenIDs []uint32
	// InvalidTokenAt is the index in token_ids of the first element that
	// was not an integer in [0, 2³²); valid when InvalidTokens. Every
	// element before it is in TokenIDs, in order, so the blocks that end
	// at or before it are whole: TensorRT-LLM writes an image's digest
	// into token_ids as a string where the image starts, after the text
	// blocks that precede it in the same store.
	InvalidTokenAt int
	// BlockSize is the event's block size (tokens per block hash).
	BlockSize int

	// LoRAID is the deprecated lora_id; valid when HasLoRAID.
	LoRAID int64
	// Medium is the raw medium string ("" when nil or absent). The Applier
	// maps it to the index tier ("gpu", "cpu", "storage"; SGLang's
	// CPU_PINNED and DISK and the names engines shipped earlier included).
	Medium string
	// LoRAName is the adapter name ("" when nil or absent). When set it
	// replaces the model as the root of the block-key chain.
	LoRAName string
	// ExtraKeys has one entry per block when the event carried extra_keys
	// (an empty entry is a nil on the wire), and is empty when extra_keys was
	// nil or absent.
	ExtraKeys [][]ExtraKey

	// Group is group_idx; valid when HasGroup (absent = ungrouped).
	Group int
	// Kind is kv_cache_spec_kind ("" when nil or absent).
	Kind string
	// SlidingWindow is kv_cache_spec_sliding_window; valid when
	// HasSlidingWindow.
	SlidingWindow int64

	// CacheSalt is SGLang's cache_salt: the "cache_salt" field of its map
	// events, or the metadata map of its positional BlockStoredWithMetadata
	// (the 8th element). "" when nil or absent. vLLM sends its salt among
	// the extra keys instead.
	CacheSalt string

	// Locality is vLLM's locality ("LOCAL" or "REMOTE" relative to the
	// publisher; "" when nil or absent), on BlockStored and BlockRemoved.
	Locality string
	// Ownership names the secondary offloading tier that produced the event
	// ("" when nil or absent), on BlockStored and BlockRemoved.
	Ownership string
	// SessionID is the session whose request triggered the store ("" when
	// nil or absent; BlockStored only). It names the request context, not
	// an owner of the block, which sessions share.
	SessionID string
}

// reset clears e for reuse, keeping the capacity of its slices.
func (e *Event) reset() {
	hashes, raws, toks, extra := e.BlockHashes[:0], e.RawHashes[:0], e.TokenIDs[:0], e.ExtraKeys[:0]
	*e = Event{BlockHashes: hashes, RawHashes: raws, TokenIDs: toks, ExtraKeys: extra}
}

// Batch is one decoded KVEventBatch (one ZeroMQ message). Decoder.Decode
// fills it; reusing the same Batch across calls makes decoding
// allocation-free in steady state.
type Batch struct {
	// TS is the engine's time.time() at publication, in seconds.
	TS float64
	// Events are the batch's known events in wire order.
	Events []Event
	// UnknownEvents counts events skipped because their tag was unknown.
	UnknownEvents int
	// DPRank is data_parallel_rank (SGLang: attn_dp_rank); valid when
	// HasDPRank. It carries no routing information: the endpoint the message
	// came from identifies the rank, since each data-parallel rank publishes on
	// its own port (the base port plus the rank).
	DPRank    int64
	HasDPRank bool

	// PublisherID is the publisher's identity in vLLM's newest batch layout
	// (the snapshot work): 16 bytes (a UUID) drawn when the publisher starts
	// and unchanged until it restarts, so a new value means a new engine
	// lifetime whatever the sequence says. Valid when HasPublisherID; zero
	// and false for every older layout and engine.
	PublisherID    [16]byte
	HasPublisherID bool

	arena []byte // backing store for RawHashes / RawParent copies
}

// Reset empties b, keeping its buffers for reuse.
func (b *Batch) Reset() {
	b.TS, b.DPRank, b.HasDPRank, b.UnknownEvents = 0, 0, false, 0
	b.PublisherID, b.HasPublisherID = [16]byte{}, false
	b.Events = b.Events[:0]
	b.arena = b.arena[:0]
}

// minEventBytes is the size of the smallest event that keeps its slot in a
// Batch: [tag] with the shortest known tag, "BlockStored" (an unknown
// event gives its slot back).
const minEventBytes = 1 + 1 + len(tagBlockStored)

// reserveEvents makes room for n more events in one allocation, keeping
// the slices of the events that previously occupied the slots. Grown one
// event at a time instead, events of a few bytes each made the decoder
// copy the slice over and over, many times the payload's size in all.
func (b *Batch) reserveEvents(n int) {
	if n <= cap(b.Events)-len(b.Events) {
		return
	}
	old := b.Events[:cap(b.Events)]
	grown := make([]Event, len(b.Events)+n)
	copy(grown, old)
	b.Events = grown[:len(b.Events)]
}

// nextEvent extends b.Events by one reset event and returns it, reusing the
// slices of an event that previously occupied that slot.
func (b *Batch) nextEvent() *Event {
	n := len(b.Events)
	if n < cap(b.Events) {
		b.Events = b.Events[:n+1]
	} else {
		b.Events = append(b.Events, Event{})
	}
	e := &b.Events[n]
	e.reset()
	return e
}

// IsHeartbeat reports whether b carries no event at all (known or not). A
// vLLM publisher with snapshots on sends such a batch, with its identity,
// when it has been idle for a second, so that silence means trouble.
func (b *Batch) IsHeartbeat() bool { return len(b.Events) == 0 && b.UnknownEvents == 0 }
