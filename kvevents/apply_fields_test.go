package kvevents

import (
	"testing"

	"github.com/shamaton/msgpack/v2"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// mapBatch encodes events as vLLM after map events (vllm#42892) does,
// through a generic msgpack encoder: an outer [ts, events, dp_rank] array
// of map events.
func mapBatch(t *testing.T, events ...map[string]any) []byte {
	t.Helper()
	evs := make([]any, len(events))
	for i, e := range events {
		evs[i] = e
	}
	raw, err := msgpack.Marshal([]any{1700000000.5, evs, 0})
	require.NoError(t, err)
	return raw
}

// storedMap is a BlockStored of blocks [1..4][5..8] (hashes wiretest.H1,
// wiretest.H2) at the chain root, with group_idx when group >= 0.
func storedMap(group int) map[string]any {
	e := map[string]any{
		"type": "BlockStored", "block_hashes": []any{wiretest.H1, wiretest.H2}, "parent_block_hash": nil,
		"token_ids": []any{1, 2, 3, 4, 5, 6, 7, 8}, "block_size": 4, "lora_id": nil, "medium": "GPU",
		"lora_name": nil, "kv_cache_spec_kind": "full_attention",
	}
	if group >= 0 {
		e["group_idx"] = group
	}
	return e
}

func removedMap(group int, hashes ...uint64) map[string]any {
	hs := make([]any, len(hashes))
	for i, h := range hashes {
		hs[i] = h
	}
	e := map[string]any{"type": "BlockRemoved", "block_hashes": hs, "medium": "GPU"}
	if group >= 0 {
		e["group_idx"] = group
	}
	return e
}

func (f *applyFixture) applyRaw(endpoint string, payload []byte) ApplyResult {
	f.t.Helper()
	require.NoError(f.t, f.d.Decode(payload, &f.b))
	return f.a.Apply(endpoint, "", &f.b)
}

// TestApplyAbsentGroupIsGroupZero: vLLM's consumers read a missing
// group_idx as group 0, so a removal without it removes blocks stored in
// group 0, and a removal for group 0 removes blocks stored without it.
func TestApplyAbsentGroupIsGroupZero(t *testing.T) {
	toks := wiretest.TokensRange(1, 8)
	for _, tc := range []struct {
		name          string
		store, remove int // group_idx, -1 = absent
	}{
		{"stored group 0, removed without group", 0, -1},
		{"stored without group, removed from group 0", -1, 0},
		{"both without group", -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newApplyFixture(t)
			res := f.applyRaw(testEndpoint, mapBatch(t, storedMap(tc.store)))
			require.Equal(t, 1, res.Stored)
			require.Equal(t, 2, f.match(testEndpoint, toks, kvindex.KeyParams{}).Blocks)

			res = f.applyRaw(testEndpoint, mapBatch(t, removedMap(tc.remove, wiretest.H2)))
			require.Equal(t, ApplyResult{Removed: 1, RemovedBlocks: 1}, res)
			require.Equal(t, 1, f.match(testEndpoint, toks, kvindex.KeyParams{}).Blocks,
				"the removed block is gone from the index")
		})
	}
	t.Run("explicit unknown group still skipped", func(t *testing.T) {
		f := newApplyFixture(t)
		f.applyRaw(testEndpoint, mapBatch(t, storedMap(-1)))
		res := f.applyRaw(testEndpoint, mapBatch(t, removedMap(3, wiretest.H2)))
		require.Equal(t, ApplyResult{Skipped: 1, SkippedBlocks: 1}, res)
		require.Equal(t, 1.0, skipped(t, f.reg, "unknown", skipUnknownGroup))
	})
}

// TestApplyLoRAIDWithoutName: vLLM 0.9 sends lora_id without lora_name. An
// adapter's blocks must never be keyed under the base model: skipped and
// counted, or keyed by the configured id → name map.
func TestApplyLoRAIDWithoutName(t *testing.T) {
	toks := wiretest.TokensRange(1, 8)
	adapterStore := func() map[string]any {
		e := storedMap(0)
		e["lora_id"] = 7
		return e
	}
	// A v0.9 positional event: ["BlockStored", hashes, parent, tokens, block_size, lora_id].
	v09, err := msgpack.Marshal([]any{1700000000.5, []any{
		[]any{"BlockStored", []any{wiretest.H1, wiretest.H2}, nil, []any{1, 2, 3, 4, 5, 6, 7, 8}, 4, 7},
	}})
	require.NoError(t, err)

	for name, payload := range map[string][]byte{"map": mapBatch(t, adapterStore()), "v0.9": v09} {
		t.Run(name+"/skipped", func(t *testing.T) {
			f := newApplyFixture(t)
			res := f.applyRaw(testEndpoint, payload)
			require.Equal(t, ApplyResult{Skipped: 1, SkippedBlocks: 2}, res)
			require.Equal(t, 1, int(skipped(t, f.reg, kindOf(name), skipLoRAUnnamed)))
			require.Zero(t, f.match(testEndpoint, toks, kvindex.KeyParams{}).Blocks,
				"a base-model request must not match an adapter's blocks")
			require.Zero(t, f.ix.Stats().Blocks)
		})
		t.Run(name+"/mapped", func(t *testing.T) {
			f := newApplyFixture(t)
			a, err := NewApplier(ApplierConfig{Model: "m", LoRANames: map[int64]string{7: "adapter-7"}}, f.ix, Options{})
			require.NoError(t, err)
			f.a = a
			res := f.applyRaw(testEndpoint, payload)
			require.Equal(t, 1, res.Stored)
			require.Zero(t, f.match(testEndpoint, toks, kvindex.KeyParams{}).Blocks)
			require.Equal(t, 2, f.match(testEndpoint, toks, kvindex.KeyParams{LoRA: "adapter-7"}).Blocks)
		})
	}
	t.Run("lora_name wins over the map", func(t *testing.T) {
		f := newApplyFixture(t)
		e := adapterStore()
		e["lora_name"] = "named"
		f.applyRaw(testEndpoint, mapBatch(t, e))
		require.Equal(t, 2, f.match(testEndpoint, toks, kvindex.KeyParams{LoRA: "named"}).Blocks)
	})
}

func kindOf(layout string) string {
	if layout == "v0.9" {
		return "none"
	}
	return "full_attention"
}

// TestTypedExtraKeysDecodedToTheirMeaning: the typed {"type": …} extra keys
// index a block exactly as the untyped strings and tuples of the same
// request do: the LoRA key is the chain root, the mm key an identifier with
// its block offset, the cache_salt key the salt of block 0.
func TestTypedExtraKeysDecodedToTheirMeaning(t *testing.T) {
	toks := wiretest.TokensRange(1, 8)
	params := kvindex.KeyParams{LoRA: "ad", CacheSalt: "salt-A",
		MM: []kvindex.MMItem{{Hash: "img-1", Offset: 2, Length: 4}}}

	untyped := storedMap(0)
	untyped["lora_name"] = "ad"
	untyped["extra_keys"] = []any{
		[]any{"ad", []any{"img-1", 2}, "salt-A"},
		[]any{"ad", []any{"img-1", -2}},
	}
	typed := storedMap(0)
	typed["extra_keys"] = []any{ // no lora_name: the typed LoRA key names the adapter
		[]any{
			map[string]any{"type": "lora", "name": "ad"},
			map[string]any{"type": "mm", "modality": "image", "hash": "img-1", "block_offset": 2},
			map[string]any{"type": "cache_salt", "salt": "salt-A"},
		},
		[]any{
			map[string]any{"type": "lora", "name": "ad"},
			map[string]any{"block_offset": -2, "hash": "img-1", "type": "mm"}, // any key order
		},
	}

	f := newApplyFixture(t)
	require.NoError(t, f.d.Decode(mapBatch(t, typed), &f.b))
	keys := f.b.Events[0].ExtraKeys
	require.Equal(t, []wire.ExtraKey{
		{Kind: wire.ExtraKeyLoRA, Value: "ad"},
		{Kind: wire.ExtraKeyMM, Value: "img-1", Offset: 2},
		{Kind: wire.ExtraKeySalt, Value: "salt-A"},
	}, keys[0])
	require.Equal(t, []wire.ExtraKey{{Kind: wire.ExtraKeyLoRA, Value: "ad"}, {Kind: wire.ExtraKeyMM, Value: "img-1", Offset: -2}}, keys[1])

	require.Equal(t, 1, f.applyRaw("10.0.0.2:8000", mapBatch(t, untyped)).Stored)
	require.Equal(t, 1, f.applyRaw(testEndpoint, mapBatch(t, typed)).Stored)
	want := f.match("10.0.0.2:8000", toks, params).Blocks
	require.Equal(t, 2, want, "the untyped reference event matches the request")
	require.Equal(t, want, f.match(testEndpoint, toks, params).Blocks, "typed keys mean the same")
	require.Zero(t, f.match(testEndpoint, toks, kvindex.KeyParams{}).Blocks, "never under the base model")
}

// TestTypedExtraKeyForms covers the remaining typed forms and the
// malformed ones, which stay opaque (never matching a block without them).
func TestTypedExtraKeyForms(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	var b wire.Batch
	e := storedMap(0)
	e["block_hashes"] = []any{wiretest.H1}
	e["token_ids"] = []any{1, 2, 3, 4}
	e["extra_keys"] = []any{[]any{
		map[string]any{"type": "prompt_embeds", "hash": []byte{0xab, 0xcd}},
		map[string]any{"type": "prompt_embeds", "hash": "abcd"},
		map[string]any{"type": "legacy", "value": []any{"img-9", 3}},
		map[string]any{"type": "legacy", "value": "plain"},
		map[string]any{"type": "mm", "hash": "no-offset"},
		map[string]any{"type": "lora", "name": 5},
		map[string]any{"type": "future", "x": 1},
		map[string]any{"type": "legacy", "value": map[string]any{"type": "lora", "name": "x"}},
	}}
	require.NoError(t, d.Decode(mapBatch(t, e), &b))
	keys := b.Events[0].ExtraKeys[0]
	require.Len(t, keys, 8)
	require.Equal(t, wire.ExtraKey{Kind: wire.ExtraKeyBytes, Value: "abcd"}, keys[0])
	require.Equal(t, wire.ExtraKey{Kind: wire.ExtraKeyString, Value: "abcd"}, keys[1])
	require.Equal(t, wire.ExtraKey{Kind: wire.ExtraKeyMM, Value: "img-9", Offset: 3}, keys[2])
	require.Equal(t, wire.ExtraKey{Kind: wire.ExtraKeyString, Value: "plain"}, keys[3])
	for _, k := range keys[4:] {
		require.Equal(t, wire.ExtraKeyOpaque, k.Kind, "%+v", k)
	}
	// Whatever decodes re-encodes to the same meaning.
	for _, f := range []wire.Format{wire.FormatVLLM, wire.FormatVLLMLegacy, wire.FormatVLLMMapBatch} {
		var again wire.Batch
		require.NoError(t, d.Decode(wire.AppendBatch(nil, &b, f), &again))
		require.Equal(t, keys, again.Events[0].ExtraKeys[0])
	}
}
