package kvevents

import "github.com/kvroute/kvroute/kvevents/wire"

// leadingBlocks returns the part of a store whose token_ids held an element
// that is not a token which comes before that element: its whole blocks
// that end at or before the first such element, or nil when there is none.
//
// TensorRT-LLM's streaming KV events (its StreamingEventSink, writing
// kv_cache_events.py's BlockStored) put a multimodal item's digest into
// token_ids as a hex string where the item starts, and merge the blocks a
// request stores in one iteration into one event, so a prompt of text then
// an image arrives as one store whose text blocks come first. Those blocks
// are keyed by their tokens and their parents alone, exactly as a request
// for the same text is, so they are indexed; the block holding the digest
// and every block after it are not, and a later store under them finds its
// parent missing. Skipping the whole store instead would leave a prompt
// prefix that every multimodal request shares (a system prompt) out of the
// index for good: the engine announces a block once.
func leadingBlocks(e *wire.Event) *wire.Event {
	if e.BlockSize <= 0 || e.InvalidTokenAt < 0 {
		return nil
	}
	keep := min(e.InvalidTokenAt/e.BlockSize, len(e.BlockHashes))
	if keep == 0 || len(e.TokenIDs) < keep*e.BlockSize {
		return nil
	}
	lead := *e
	lead.InvalidTokens, lead.InvalidTokenAt = false, 0
	lead.BlockHashes = e.BlockHashes[:keep:keep]
	if len(e.RawHashes) > keep {
		lead.RawHashes = e.RawHashes[:keep:keep]
	}
	lead.TokenIDs = e.TokenIDs[: keep*e.BlockSize : keep*e.BlockSize]
	if len(e.ExtraKeys) > keep {
		lead.ExtraKeys = e.ExtraKeys[:keep:keep]
	}
	return &lead
}
