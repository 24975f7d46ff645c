// Package simengine is a simulated vLLM engine model, the test fleet of
// kvroute's end-to-end tests, examples, benchmarks and routing-quality
// simulations: no GPU, but the parts a prefix-cache router can observe behave
// like vLLM. Its HTTP front (vLLM's routes, metrics and ZeroMQ KV events) is
// the package simengine/server, and the binary that serves one is
// cmd/simengine.
//
//   - Tokenizer: a deterministic word/punctuation splitter whose pieces map to IDs
//     by FNV-1a (Tokenize, TokenID), identical in every instance, plus one chat
//     template for chat completions, Anthropic Messages and Responses
//     (ApplyChatTemplate).
//   - KV cache: NumGPUBlocks paged blocks of BlockSize tokens with vLLM's prefix
//     cache. Block hashes are vLLM's sha256_cbor with the fixed "vllm-none-hash"
//     seed (HashBlock, NoneHash), so they equal a real vLLM's hashes for the same
//     token IDs; events carry the last 8 digest bytes (Digest.U64).
//   - Events (Event, EventBatch, EventSink): BlockStored for newly cached full
//     blocks during prefill and decode, nothing on a prefix hit, one BlockRemoved
//     per hash on lazy LRU eviction, AllBlocksCleared after a successful reset;
//     one batch per scheduler step that produced events.
//   - Counters (Stats, and vllm:* metrics through Options.Registerer):
//     prefix_cache_queries counts prompt tokens per admitted request,
//     prefix_cache_hits the cached tokens, capped at floor((n-1)/bs)*bs. The
//     gauges a router reads for saturation mean what vLLM's do:
//     vllm:num_requests_running and vllm:num_requests_waiting are the lengths
//     of the two queues (vllm:num_requests_waiting_by_reason splits the
//     waiting ones: "deferred" those waiting for their KV transfer and,
//     with Config.LoRA, those the last admission pass skipped because
//     their adapter found no slot, as vLLM counts its skipped_waiting
//     queue; "capacity" the others), vllm:kv_cache_usage_perc is the
//     fraction of blocks held by running requests (of all but the null
//     block with Config.NullBlock, as vLLM's BlockPool.get_usage).
//   - Scheduler: FCFS, at most MaxNumSeqs running requests (vLLM's
//     --max-num-seqs; the others wait in arrival order, and a waiting request
//     is aborted out of the queue at once), chunked prefill within
//     MaxNumBatchedTokens per step, one decode token per running request per
//     step, recompute preemption when blocks run out. A step lasts (DecodeStep + tokens/PrefillTokensPerSecond) ×
//     TimeScale, so time to first token grows with uncached tokens and queueing.
//
// Prefill/decode disaggregation: a request whose prompt KV arrived from a
// prefill engine (Request.RemoteKVTokens) is admitted with those tokens
// computed; its received full blocks are cached and reported in a
// BlockStored (medium GPU) as vLLM's decoder reports blocks its KV
// connector received, only the rest of the prompt (at least its last
// token) is computed, and Stats.KVTransferTokens counts them apart from
// prefix-cache hits. A prefill engine's request with HoldKV keeps its
// blocks in use after it finishes until ReleaseKV (vLLM's delayed free
// while a decoder reads them); CachedBlocks lists which of a request's
// blocks an engine holds; Defer counts a request waiting for its transfer. The HTTP protocol (kv_transfer_params, the read, the
// failure policy) is simengine/server's.
//
// Clocks: New returns an engine on a virtual clock that only moves through
// AdvanceTo, which makes large simulations fast and reproducible (drive many
// engines by repeatedly advancing the one with the smallest NextEventTime).
// NewRealTime returns an engine that runs its own goroutine on the wall clock;
// Close stops it. Results arrive through the Request.OnToken and Request.OnDone
// callbacks in both modes.
//
// Generated text is deterministic: output token k of a request depends only on
// its prompt tokens and k, and is a word whose text re-tokenizes to the same ID,
// so multi-turn conversations that send the answer back hit its decode blocks.
//
// LoRA adapters (Config.LoRA, lora.go): like vLLM with --enable-lora and
// --max-loras, a batch uses at most MaxLoRAs adapters and a waiting request
// whose adapter finds no slot is skipped; admitting a request whose
// adapter is in no slot loads it, evicting the least recently used adapter
// no running request uses, and the step pays LoadTime per adapter loaded.
// The engine exposes vllm:lora_requests_info as vLLM does (a series per
// combination of running and waiting adapters and max_lora, valued at the
// time it was last set; the newest maxLoRASeries are kept).
//
// Differences from vLLM that matter little to a router: the engine never emits
// EOS (every request generates exactly MaxTokens tokens), it has one KV-cache
// group unless Config.Hybrid adds a sliding-window and a Mamba group
// (hybrid.go states what they simplify), no multimodal model (a request's multimodal items, Request.MM, key
// its blocks as vLLM's do and change nothing else), and it counts a request's prefix-cache lookup
// once, at its first admission (a preempted request is not counted again).
package simengine
