// Package mmfeatures reads the multimodal features of a vLLM
// GenerateRequest body (the "features" member sent to the token-in route
// /inference/v1/generate) and admits them by vLLM's own rules, so that the
// kvroute gateway and the simulated engine refuse exactly the features vLLM
// refuses and see the items of the rest in the order vLLM's engine keys its
// blocks by.
//
// vLLM declares the features as its MultiModalFeatures and
// PlaceholderRangeInfo models (vllm/multimodal/feature_specs.py) and turns
// them into the engine's input in engine_input_from_features
// (vllm/multimodal/feature_utils.py); the engine's InputProcessor
// (vllm/v1/engine/input_processor.py) then pairs each placeholder with the
// hash at its index in the same modality, sorts the items by placeholder
// offset (argsort_mm_positions in vllm/multimodal/utils.py), and the prefix
// cache adds the item's hash to the extra keys of every block the walk in
// _gen_mm_extra_hash_keys (vllm/v1/core/kv_cache_utils.py) finds it in. What
// vLLM admits, case by case:
//
//   - mm_hashes and mm_placeholders are both required objects of lists by
//     modality; a missing or null one, a null list, a null hash, or a
//     placeholder without an integer offset and length is refused by the
//     request model's validation. offset must be an integer >= 0 and length
//     an integer > 0, both strictly typed (no floats, strings or booleans);
//     is_embed, when given, is a list of booleans as long as the
//     placeholder.
//   - A modality with placeholders but no hashes, or with hashes but no
//     placeholders, is refused: the two objects must name the same
//     modalities, even when a list is empty.
//   - Each modality must have as many hashes as placeholders; the i-th
//     placeholder of a modality is the i-th hash's item.
//   - Placeholders of all modalities together must not overlap: sorted by
//     offset, each must start at or after the end of the one before
//     (adjacent items are fine). Overlapping placeholders are refused.
//   - Placeholders need not be sorted, within a modality or across
//     modalities: the engine sorts the items by offset. Since they cannot
//     overlap or be empty, no two share an offset and the order is total.
//   - Every placeholder must end within token_ids.
//   - kwargs_data and mm_metadata, when not null, must name the same
//     modalities as mm_hashes with lists as long, of strings or nulls.
//   - An item whose mm_metadata entry is a string while its kwargs_data
//     entry is null (or kwargs_data is null) is metadata-only: its
//     embeddings must come through the encoder-cache connector, and the
//     request (GenerateRequest, not the features alone) is refused unless
//     its ec_transfer_params is a non-empty object or the features'
//     requires_kv is true (Features.CheckTransfer).
//   - requires_kv, when present, is a boolean (not null). When true, the
//     items come as decoder KV handed over from another engine:
//     kv_handoff must then be given, with version 1, a non-empty
//     model_fingerprint and position_state "sequence" (kv_handoff, when
//     not null, must have those three whatever requires_kv says);
//     mm_hashes must have at least one modality, none with an empty list
//     or an empty hash; and kwargs_data may hold only nulls.
//
// Earlier vLLM releases built the engine input from the features without
// that validation: the InputProcessor looked each placeholder's hash up by
// modality and index, failing the request on a placeholder without a hash
// and ignoring a hash without a placeholder, and admitted overlapping,
// empty or negative placeholders, whose handling then depends on the model
// runner. Refusing all of them, as current vLLM does, is the choice that
// never routes by keys the engine would not produce.
package mmfeatures
