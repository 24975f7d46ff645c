package wire

import (
	"fmt"
	"strings"
)

// Format selects the wire layout AppendBatch writes.
type Format uint8

const (
	// FormatVLLM is current vLLM (vllm#42892 and later, seen in v0.26.0):
	// the batch is the array [ts, events, dp_rank] (dp_rank nil when unset)
	// and each event is a map with "type" first, fields in declaration
	// order, None-default fields omitted and no-default fields always
	// written (even when nil), as msgspec encodes vLLM's structs.
	FormatVLLM Format = iota
	// FormatVLLMLegacy is the last all-array vLLM layout (before
	// vllm#42892): BlockStored has 12 elements, BlockRemoved 4,
	// AllBlocksCleared 1, trailing nils kept.
	FormatVLLMLegacy
	// FormatSGLang is recent SGLang: array events, BlockStored with 7
	// elements (8 with the metadata map {"cache_salt": …} when CacheSalt is
	// set), BlockRemoved with 3, hashes written as signed int64.
	FormatSGLang
	// FormatVLLMMapBatch is the map-shaped outer batch of one unsettled vLLM
	// revision ({"ts", "events", "data_parallel_rank"}), with map events. It exists
	// for tests of defensive decoding.
	FormatVLLMMapBatch
	// FormatTRTLLM is TensorRT-LLM's publisher (its PyTorch backend's
	// streaming KV events): the array batch [ts, events, dp_rank] and map
	// events like FormatVLLM's, with locality the last field of both event
	// types and multimodal keys written as its mm_keys ({"type": "mm_key",
	// "hash", "start_offset"} per segment) instead of extra_keys. Hashes are
	// always integers and there is no publisher identity.
	FormatTRTLLM
	// FormatSGLangMap is current SGLang (sgl-project/sglang#37482 and
	// later): the array batch [ts, events, attn_dp_rank] and msgspec tagged
	// map events with None defaults omitted; BlockStored carries block_hashes,
	// parent_block_hash, token_ids, block_size and lora_id, then medium,
	// cache_salt and session_id when set, BlockRemoved block_hashes and
	// medium when set. Hashes are written as signed int64.
	FormatSGLangMap
)

// formatNames are the Formats' names, indexed by Format: what String
// returns and what a configuration writes.
var formatNames = [...]string{
	FormatVLLM:         "vllm",
	FormatVLLMLegacy:   "vllm-legacy",
	FormatSGLang:       "sglang",
	FormatVLLMMapBatch: "vllm-map-batch",
	FormatTRTLLM:       "trtllm",
	FormatSGLangMap:    "sglang-map",
}

// String returns a short name of f ("unknown" for a value no constant
// has).
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return "unknown"
}

// MarshalText returns f's name (String), so that a configuration names the
// layout ("format": "sglang-map") rather than giving its number, which
// says nothing and shifts should a Format be added before another. A value
// no constant has is an error.
func (f Format) MarshalText() ([]byte, error) {
	if int(f) >= len(formatNames) {
		return nil, fmt.Errorf("wire: unknown wire format %d", f)
	}
	return []byte(formatNames[f]), nil
}

// UnmarshalText sets f to the Format named text, a name String returns.
// Any other text, a number included, is an error listing the names, and
// leaves f as it was.
func (f *Format) UnmarshalText(text []byte) error {
	for i, name := range formatNames {
		if string(text) == name {
			*f = Format(i)
			return nil
		}
	}
	quoted := make([]string, len(formatNames))
	for i, name := range formatNames {
		quoted[i] = fmt.Sprintf("%q", name)
	}
	return fmt.Errorf("wire: unknown format %q (want one of %s)", text, strings.Join(quoted, ", "))
}
