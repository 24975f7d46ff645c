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
// keyed. All integers are little-endian and the hash is XXH3-64 with seed 0
// and the default secret.
// This is key scheme version 2 (KeySchemeVersion):
//
//	root     = XXH3-64("kvroute/v2" ‖ 0x00 ‖ name)
//	           name = the LoRA adapter name if the request targets one, else the model name
//	block[i] = XXH3-64(T ‖ E)
//	  T      = the block's token IDs, each as 4 bytes (uint32)
//	  E      = for each extra key of block i, in order: its byte length as 8 bytes, then its bytes
//	key[i]   = Chain(key[i-1], block[i])   (key[-1] = root)
//	Chain(p, b): x = p XOR (b × 0x9E3779B97F4A7C15) mod 2^64, then SplitMix64's finaliser:
//	           x ^= x>>30; x *= 0xBF58476D1CE4E5B9; x ^= x>>27; x *= 0x94D049BB133111EB; x ^= x>>31
//
// Each block is hashed on its own, so consecutive blocks hash in parallel on
// the CPU and only the two-multiply Chain is sequential; Chain is a bijection
// in each argument, so keys keep 64-bit collision strength over the whole
// prefix (the same tokens under another parent, or other tokens under the
// same parent, never share a key).
//
// Extra keys of block i (vLLM's rule and order: multimodal keys, then the
// cache salt): the identifier of every multimodal item whose placeholder
// range [Offset, Offset+Length) overlaps the block's token range, in item
// order, followed on block 0 only by the request's cache_salt when it is
// non-empty. The identifier is the item's mm_hash, except that a vLLM
// engine started with --enable-tower-connector-lora identifies the items
// of a request for a LoRA adapter by the mm_hash behind a per-adapter
// prefix ("lora_name:" ‖ mm_hash, or "lora_name:" ‖ a fingerprint of the
// adapter's path ‖ ":" ‖ mm_hash in later versions), because the adapter
// changes the item's embedding: KeyParams.MMPrefix is that prefix, which
// the router builds when configured to match such engines. vLLM's current
// hash pairs each identifier with the item's offset from the block's start;
// kvroute keys the identifier alone on both sides, so that keys match
// engines that publish either form. On the event side, the extra keys of block i are the event's
// extra_keys[i] as strings (multimodal entries reduced to their identifier,
// LoRA names removed), and the root is RootKey of the event's LoRA name or
// the endpoint's model. Fixed vector (model "meta-llama/Llama-3.1-8B-Instruct",
// block size 4, tokens 1…8):
//
//	root           0xea84fc0a0a397c3b
//	key[0], key[1] 0x81f89a972b4283c4, 0x1d524bc5a49dcdab
//	with cache_salt "salt-A":        0x688150cfe3bd79ec, 0xb8e3a445291bb21b
//	with LoRA "my-lora" (as root):   0x036410385835a330, 0x62e30e0b2c19a01f
//
// and at the default block size (same model, tokens 0…127, two blocks of
// 256 bytes): key[0], key[1] = 0xac98ef48a9a04e2f, 0xecc97da21eadd486.
//
// Keys reuses the caller's slice and allocates nothing. The package depends
// on github.com/zeebo/xxh3 for XXH3-64 in general. For blocks of 64 tokens
// (256 bytes) without extra keys — nearly every block of every request and
// event — amd64 machines with AVX2 use the package's own kernel
// (keyhash_amd64.s), which computes the same XXH3-64 value with the
// accumulators in registers and runs a whole request's chain in one call:
// a 2,048-token request is keyed in about half the time of one XXH64 pass
// over its tokens, where xxh3.Hash's per-call set-up, not the hashing,
// would dominate at that size. golang.org/x/sys/cpu tells whether the CPU
// (and OS) support AVX2; elsewhere, or with the purego build tag, blocks go
// through xxh3.Hash. Either way the keys are identical.
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
// The index's memory is bounded in bytes over all endpoints by
// Config.MaxBytes (default 8 GiB). Each endpoint is charged a fixed cost
// per entry it owns — 22 bytes per membership, 10 per engine-hash entry
// plus 13 when no other endpoint shares its (hash, key) pair, 96
// per complex-membership side-table entry and 12 per (tier, group) pair
// its array has room for beyond two, 24 per speculative entry, the
// structures' measured average heap per entry — and the index 20 bytes per
// (hash, key) pair several endpoints share; Stats.Bytes (gauge
// kvroute_kv_index_bytes) is their sum, within about 15 % of the heap the
// index takes with blocks held by one endpoint or by four
// (TestAccountedBytesTrackHeap). Keeping it current costs a Store one
// recount of the endpoint's entries and one atomic add; Match does nothing
// for it. When a Store or Speculate leaves the index above the bound, the
// endpoint holding the most accounted bytes drops its speculative entries,
// then evicts its oldest stored blocks, until the index is 1/1024 of the
// bound below it, counted as evictions with reason "memory": an engine
// flooding BlockStored events evicts its own blocks, and never another
// endpoint's while it is the largest, and a flood of speculation naming an
// endpoint (a broken peer replica's decisions) loses those guesses before
// any block the endpoint's engine confirmed. The
// entries of an endpoint's non-prefix cache groups (StoreGroup) are
// charged to it too, 74 bytes each (groups_mem.go), and go with the
// full-attention blocks memory eviction takes. The bound
// can be exceeded, while Stores run, by one event's blocks per Store
// running at once (each checks the bound when its event is in). Freed slots
// are reused by later stores; the tables shrink only when they are rebuilt.
// A rejected Store leaves no trace (no endpoint, no tier registered).
//
// Match walks a request's keys from block 0 and reports, per candidate, the
// contiguous blocks it holds, a tier-weighted score and per-tier counts. It
// stops at the first block no candidate holds, takes no locks on the block
// map (it is read with atomic loads and never waits for writers; only the
// non-prefix cache groups of a candidate that has some are read under
// their read lock) and allocates nothing with a reused MatchResult. Keys are looked up eight at a time,
// every key's home slot read before any block is processed, so that their
// cache misses overlap. Match writes no record per candidate: for up to 64
// candidates it keeps the set still matching after each block (one word per
// block), for more each candidate's count, plus accumulators for the blocks
// held other than as a confirmed GPU copy; MatchResult's Blocks, Score, At
// and Endpoints derive each candidate's EndpointMatch from them on demand. A block held by several endpoints keeps
// its standard memberships (confirmed, GPU tier only) sorted by endpoint ID
// with a 64-bit mask of them relative to the lowest ID, so that for up to 64
// candidates whose IDs span fewer than 64 — a pool registered together —
// those holders cost one load and a shift per block; other memberships, and
// other candidate sets, are scanned exactly as before.
//
// Memory is about 55 bytes of heap per (block, endpoint) membership when no
// block is shared and 29 when every block is held by four endpoints drawn
// at random from a fleet of 64 (43 from a fleet of 1,024, whose holders'
// IDs usually span 64 or more) (BenchmarkMemory, 1 Mi memberships),
// engine-hash maps included:
// endpoints are interned to 24-bit IDs; a membership is one uint64
// (tier mask, cache group, reference counts or speculative expiry); the
// block map is 256 independently locked open-addressing tables of 16-byte
// (key, value) slots, where the value is the block's only membership or a
// handle to its member array in a per-table arena of uint64 words (for
// holders all in the GPU tier alone, alike above the endpoint ID and with
// IDs spanning fewer than 64, only the mask word and the first membership:
// the others follow from the mask); each
// endpoint's engine-hash map is an insertion-ordered slab of 4-byte units
// with a 4-byte-per-slot open-addressing index (a slot also carries a
// fingerprint of the hash), where an entry is either the endpoint's own
// (hash, key) pair, four units, or one unit referring to the pair in a pool
// shared by the endpoints that each stored it (engines of one model publish
// the same engine hash for the same block, so four holders keep the pair
// once; an endpoint still resolves only hashes it stored). None of these
// holds Go pointers per block, so the garbage collector's work does not
// grow with the index (a few hundred large pointer-free arrays, plus one
// 8 KiB chunk per 2,048 units and one 160 KiB chunk per 8,192 shared
// pairs).
//
// # Snapshots
//
// WriteSnapshot streams the index in a versioned binary format (see
// SnapshotFormatVersion for the layout): a header with magic, format
// version, KeySchemeVersion and block size; one section per endpoint with
// its engine-hash → key chain in first-store order and every confirmed
// membership with its (tier, group, reference count) pairs, and (format
// version 2) its non-prefix cache groups with their kind, window and
// entries, checksummed (XXH64) per section; a trailer with the totals.
// Version-1 snapshots, without groups, still load. Speculative entries are
// not written. Each section is copied under that endpoint's PositionLock
// and write lock only, into a buffer written out with no lock held: Match
// never waits, other endpoints' writers never wait, and memory is one
// encoded section (about 20 bytes per membership). With an event
// subscriber that applies each batch under the endpoint's PositionLock and
// records its stream position there (kvevents does), every section is the
// effect of exactly the batches up to its recorded position.
//
// ReadSnapshot validates everything — truncation, checksums, versions,
// block size, and every count against bounds before anything is allocated
// for it — and loads a snapshot whole or not at all: each section is
// applied only after its checksum verified, and a failure later in the
// input (truncation, a peer dying mid-stream) clears every endpoint already
// loaded from it before the error returns. It is meant for an index that is
// starting; the reader is fuzzed (FuzzReadSnapshot, FuzzSnapshotSection).
//
// # Metrics
//
// With Options.Registerer set, the index exports its metrics:
// llm_d_epp_kv_cache_index_lookup_requests_total,
// llm_d_epp_kv_cache_index_lookup_hits_total,
// llm_d_epp_kv_cache_index_lookup_latency_seconds, kvroute_kv_index_blocks,
// kvroute_kv_index_memberships, kvroute_kv_index_bytes (the accounted
// bytes Config.MaxBytes bounds) and kvroute_kv_index_evictions_total{reason}
// with reasons "capacity", "speculative_expired", "endpoint_removed" (every
// membership Clear removes) and "memory" (Config.MaxBytes). Rejected stores are counted by the
// caller from StoreError.Reason. A nil Registerer registers nothing; New
// registers every collector through telemetry.Set.Register, all or none (New
// fails and leaves nothing registered), and Close unregisters exactly what
// New registered, so a closed index can be built again on the same registry.
package kvindex
