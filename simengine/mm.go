package simengine

import (
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// Multimodal items. The simulated engine has no vision or audio model, but
// a router can tell one thing of how vLLM treats a prompt's images and
// clips: which blocks they key. vLLM adds an extra key to the hash of every
// block a multimodal item's placeholder tokens overlap, the pair (the
// item's identifier, the offset of its first placeholder token relative to
// the block's first token; negative when the item began in an earlier
// block), after the LoRA name and before the cache salt. Two prompts with
// the same token IDs and different images therefore share only the blocks
// before the first image. The engine keys its blocks the same way and
// publishes the pairs in its BlockStored events' extra keys.

// MMItem is one multimodal item of a prompt: its identifier (vLLM's
// mm_hash, as a render answer's features give it) and the placeholder
// tokens it occupies.
type MMItem struct {
	Identifier string
	Offset     int // first placeholder token in the prompt
	Length     int // number of placeholder tokens
}

// ExtraKey is one extra key of a block's hash, as vLLM builds them: a text
// key (the LoRA name, the cache salt), or with MM set a multimodal item's
// (Value = identifier, Offset = its first placeholder token relative to
// the block's first token) pair.
type ExtraKey struct {
	Value  string
	MM     bool
	Offset int
}

// Wire returns k as a BlockStored event carries it on the wire: a text key
// as a string, a multimodal item's key as vLLM's [identifier, offset] pair.
func (k ExtraKey) Wire() wire.ExtraKey {
	if k.MM {
		return wire.ExtraKey{Kind: wire.ExtraKeyMM, Value: k.Value, Offset: int64(k.Offset)}
	}
	return wire.ExtraKey{Kind: wire.ExtraKeyString, Value: k.Value}
}

// ErrMMItems is returned by Submit for multimodal items vLLM would never
// produce: not sorted by Offset, overlapping, with an empty identifier, a
// negative offset or length, or ending past the prompt.
var ErrMMItems = errors.New("engine: invalid multimodal items")

// checkMM applies ErrMMItems's rules to the items of a prompt of n tokens.
func checkMM(items []MMItem, n int) error {
	end := 0
	for i, m := range items {
		switch {
		case m.Identifier == "":
			return fmt.Errorf("%w: item %d has no identifier", ErrMMItems, i)
		case m.Offset < 0 || m.Length < 0:
			return fmt.Errorf("%w: item %d has offset %d and length %d", ErrMMItems, i, m.Offset, m.Length)
		case m.Offset < end:
			return fmt.Errorf("%w: item %d starts at %d, before the previous item ends (%d)", ErrMMItems, i, m.Offset, end)
		case m.Length > n-m.Offset:
			return fmt.Errorf("%w: item %d ends past the %d-token prompt", ErrMMItems, i, n)
		}
		end = m.Offset + m.Length
	}
	return nil
}

// appendMMKeys appends the multimodal extra keys of the block [start, end)
// of a sequence whose prompt has promptBlocks full blocks, as vLLM's
// _gen_mm_extra_hash_keys does: every item whose placeholder range the
// block overlaps, in order. vLLM hashes a prompt's full blocks when the
// request arrives, looking at every item, and a block completed later
// (by generated tokens) looking at the last item only; so does this.
func appendMMKeys(dst []ExtraKey, items []MMItem, start, end, block, promptBlocks int) []ExtraKey {
	if len(items) == 0 {
		return dst
	}
	if block >= promptBlocks {
		items = items[len(items)-1:]
	}
	for _, m := range items {
		if end <= m.Offset {
			break // this block has not reached the item (items are sorted)
		}
		if start >= m.Offset+m.Length {
			continue // the block is past the item
		}
		dst = append(dst, ExtraKey{Value: m.Identifier, MM: true, Offset: m.Offset - start})
		if end < m.Offset+m.Length {
			break // the item runs on past this block
		}
	}
	return dst
}
