package kvevents

import "github.com/kvroute/kvroute/kvindex"

// Reason says why a KV event, or a whole message, was dropped or left out of
// the index: the reason label of kvroute_kv_events_dropped_total and of
// llm_d_epp_kv_cache_events_stores_skipped_total. It is kvindex.Reason, so the
// index's own reasons (kvindex.ReasonParentMissing, ReasonNonPrefixKind,
// ReasonNonDense, ReasonMalformed, ...; see kvindex.StoreError) are Reasons of
// kvevents too and are not declared again here. The values are fixed strings:
// dashboards and alerts match them, and none comes from the wire.
type Reason = kvindex.Reason

// Reasons of llm_d_epp_kv_cache_events_stores_skipped_total that the Applier
// finds itself, before the index sees the event. The index adds
// kvindex.ReasonNonPrefixKind (a cache group that is not prefix-shaped, also
// for removals), kvindex.ReasonNonDense, kvindex.ReasonMalformed (also a
// negative group_idx) and kvindex.ReasonUnknownHash; the events of engines
// of another block size add skipResizedExtraKeys and skipResizedUnmapped
// (apply_resize.go).
const (
	skipInvalidBlockSize Reason = "invalid_block_size" // block_size <= 0 (with tokens) or above 65536
	skipInvalidTokens    Reason = "invalid_tokens"     // token_ids held a non-uint32 element (the blocks from it on)
	skipNoBlocks         Reason = "no_blocks"          // a store or removal without block hashes
	skipUnknownGroup     Reason = "unknown_group"      // a removal for a group never seen in a store
	skipLoRAUnnamed      Reason = "lora_unnamed"       // lora_id without lora_name, and no configured name for the id
	skipIndexRejected    Reason = "index_rejected"     // the index refused a store with an error that names no reason
	skipTooManyTokens    Reason = "too_many_tokens"    // a store or removal whose engine blocks, mapped to the index's smaller blocks, cover over 2^24 tokens
)

// Reasons of kvroute_kv_events_dropped_total. A store whose parent the index
// does not know is dropped with kvindex.ReasonParentMissing.
const (
	dropDecodeError     Reason = "decode_error"          // payload rejected by the Decoder
	dropQueueFull       Reason = "queue_full"            // message dropped by a full worker queue
	dropStaleSeq        Reason = "stale_seq"             // message older than the endpoint's watermark
	dropUnknownEvent    Reason = "unknown_event"         // event with an unknown tag
	dropHoldFull        Reason = "hold_full"             // live message arriving while a replay runs, beyond HoldSize or HoldBytes
	dropUnknownEndpoint Reason = "unknown_endpoint"      // bind mode: the topic names no endpoint passed to Ensure
	dropNotSelected     Reason = "not_selected"          // bind mode: the endpoint's labels do not match Options.Matcher
	dropAlreadyApplied  Reason = "already_applied"       // live message at or below the watermark (a replay applied it first)
	dropModelMismatch   Reason = "model_mismatch"        // replayed batch applied under the pool's default model, cleared when the live stream named another (it is replayed again under that one)
	dropSuperseded      Reason = "superseded"            // live message held or queued when a publisher restart, a new publisher identity or Resync began a new generation (the replay that follows rebuilds the endpoint), or when a new address, replay address or model replaced the endpoint's stream
	dropMalformed              = kvindex.ReasonMalformed // a message not of 3 frames, or a sequence frame that is not 8 bytes
)
