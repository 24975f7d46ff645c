// Package kvindex computes kvroute's block keys from token IDs and indexes
// which endpoint (model-server instance, e.g. "10.0.0.7:8000") holds which
// KV-cache blocks, as reported by the engines' KV events. A router asks it
// which candidate endpoints hold the longest contiguous prefix of a request.
//
// # Block keys
//
// The router keys blocks with its own chained hash, so engine hashing (vLLM's
// SHA-256/CBOR, SGLang's SHA-256 pages) never has to be reproduced; engine
// hashes are only mapped to router keys, per endpoint. Tokens are cut into
// blocks of BlockSize tokens (default 64); a trailing partial block is not
// keyed. All integers are little-endian and the hash is XXH64 with seed 0:
//
//	root    = XXH64("kvroute/v1" ‖ 0x00 ‖ name)
//	          name = the LoRA adapter name if the request targets one, else the model name
//	key[i]  = XXH64(P ‖ T ‖ E)
//	  P     = key[i-1] (root for i = 0) as 8 bytes
//	  T     = the block's token IDs, each as 4 bytes (uint32)
//	  E     = for each extra key of block i, in order: its byte length as 8 bytes, then its bytes
//
// Extra keys of block i (vLLM's rule and order: multimodal keys, then the
// cache salt): the identifier (mm_hash) of every multimodal item whose
// placeholder range [Offset, Offset+Length) overlaps the block's token range,
// in item order, followed on block 0 only by the request's cache_salt when it
// is non-empty. On the event side, the extra keys of block i are the event's
// extra_keys[i] as strings (multimodal entries reduced to their identifier,
// LoRA names removed), and the root is RootKey of the event's LoRA name or
// the endpoint's model. Fixed vector (model "meta-llama/Llama-3.1-8B-Instruct",
// block size 4, tokens 1…8):
//
//	root           0x149b9a24d3587105
//	key[0], key[1] 0x37c37a75f6e87dae, 0x42cc08af14b11317
//	with cache_salt "salt-A":        0x0a6049af992907c5, 0x2953dd599689a7dc
//	with LoRA "my-lora" (as root):   0x7cc13df82df36b29, 0xb47325f35efb46a1
//
// Keys reuses the caller's slice and allocates nothing.
//
// # The index
//
// Store, Remove and Clear apply an endpoint's BlockStored, BlockRemoved and
// AllBlocksCleared events. A store's parent engine hash is resolved through
// that endpoint's own engine-hash → key map (a fleet-wide map would chain
// one model's blocks off another model's keys when engines share a hash
// seed); an unknown parent rejects the event with ErrParentMissing and
// indexes nothing. Only prefix-shaped cache groups are indexed; events with
// another block size, non-dense token spans or non-prefix kinds are rejected
// with a *StoreError whose Reason is a metric label. A block is held per
// (endpoint, tier, cache group): removing one tier or group keeps the others,
// and stores are reference-counted, because vLLM announces (and later
// removes) each GPU copy of a block it cached twice, and offloading
// connectors may announce a block more than once. Speculate marks blocks as
// held for a short TTL between a routing decision and the engine's events;
// a confirmed store supersedes it and expiry is enforced by Match and by a
// background sweep (Close stops it). Each endpoint's engine blocks are
// bounded by Config.MaxBlocksPerEndpoint, evicting its oldest first.
//
// Match walks a request's keys from block 0 and reports, per candidate, the
// contiguous blocks it holds, a tier-weighted score and per-tier counts. It
// stops at the first block no candidate holds, takes no locks (the block map
// is an xsync.MapOf of immutable values) and allocates nothing with a reused
// MatchResult.
//
// Memory is about 83 bytes of heap per (block, endpoint) membership when no
// block is shared (BenchmarkMemory, 1 Mi memberships), engine-hash map
// included, and less when endpoints share blocks (about 49 bytes with four
// holders per block): endpoints are interned to 24-bit IDs, a membership is
// one uint64 inside the block's value (tier mask, cache group, reference
// counts or speculative expiry), a block held by one endpoint needs no
// allocation besides its map entry, and each endpoint's engine-hash map is an
// insertion-ordered slab with a 4-byte-per-slot open-addressing index.
//
// # Metrics
//
// With Config.Registerer set, the index exports the index section of
// kvroute's metrics spec: llm_d_epp_kv_cache_index_lookup_requests_total,
// llm_d_epp_kv_cache_index_lookup_hits_total,
// llm_d_epp_kv_cache_index_lookup_latency_seconds, kvroute_kv_index_blocks,
// kvroute_kv_index_memberships and kvroute_kv_index_evictions_total{reason}
// with reasons "capacity", "speculative_expired" and "endpoint_removed"
// (every membership Clear removes). Rejected stores are counted by the
// caller from StoreError.Reason.
package kvindex
