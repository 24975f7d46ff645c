package simengine

import (
	"errors"
	"time"
)

// ReqID identifies a submitted request within one engine.
type ReqID uint64

// Request is one generation request, already tokenized.
type Request struct {
	// Prompt holds the prompt token IDs (copied by Submit).
	Prompt []uint32
	// MaxTokens is the number of tokens to generate (the engine ignores EOS and
	// always generates exactly this many, unless aborted).
	MaxTokens int
	// CacheSalt, when non-empty, is an extra key of block 0 (vLLM cache_salt).
	CacheSalt string
	// LoRAName, when non-empty, is an extra key of every block; LoRAID goes on
	// events as lora_id.
	LoRAName string
	LoRAID   int
	// MM are the prompt's multimodal items, sorted by Offset: each keys
	// every block its placeholder tokens overlap, after the LoRA name and
	// before the cache salt, as vLLM keys them (mm.go). The engine has no
	// multimodal model: the items change the blocks' hashes, nothing else.
	// Submit refuses items vLLM would never produce (ErrMMItems).
	MM []MMItem
	// RemoteKVTokens is how many leading prompt tokens' KV arrived by a KV
	// transfer from a prefill engine (P/D disaggregation, pd.go): at first
	// admission they count as computed beyond the local prefix-cache hit,
	// their full blocks are cached and reported (BlockStored, GPU), and
	// only the rest of the prompt is computed. vLLM always computes the last
	// prompt token, so at most len(Prompt)-1 are taken. Zero for an ordinary
	// request.
	RemoteKVTokens int
	// HoldKV keeps the request's KV blocks referenced after it finishes
	// successfully, until ReleaseKV(id): a prefill engine's blocks waiting
	// for a decoder's read, as vLLM's connector delays freeing them
	// (request_finished returning delay_free_blocks). They stay in use
	// (kv_cache_usage_perc) and cannot be evicted meanwhile.
	HoldKV bool

	// OnToken, if set, is called for every generated token; OnDone, if set, once
	// at the end (also for aborts and Close). Both are called from the goroutine
	// that advances the engine (the real-time loop, or the caller of AdvanceTo),
	// in order, and must not block. They may call Submit, Abort, Stats and
	// ResetPrefixCache, but not AdvanceTo, RunUntilIdle or Close.
	OnToken func(TokenEvent)
	OnDone  func(Result)
}

// TokenEvent reports one generated token.
type TokenEvent struct {
	ID    ReqID
	Index int    // 0 for the first token
	Token uint32 // token ID
	Text  string // its text (Detokenize of Token)
	Time  time.Time
}

// Finish reasons, as vLLM's finished_reason label values.
const (
	FinishLength = "length"
	FinishAbort  = "abort"
)

// Result reports a finished request.
type Result struct {
	ID           ReqID
	PromptTokens int
	// CachedTokens is the prefix-cache hit at admission (what the request added
	// to prefix_cache_hits), capped at floor((PromptTokens-1)/BlockSize)*BlockSize.
	CachedTokens int
	// RemoteKVTokens is how many prompt tokens beyond CachedTokens came by KV
	// transfer (Request.RemoteKVTokens, as taken at admission).
	RemoteKVTokens int
	OutputTokens   []uint32
	Text           string
	Arrival        time.Time
	FirstToken     time.Time // zero if no token was generated
	Finish         time.Time
	FinishReason   string // FinishLength or FinishAbort
	// Err is nil on success, ErrAborted after Abort, ErrClosed after Close.
	Err error
}

// TTFT is the time from arrival to the first token (0 if none was generated).
func (r Result) TTFT() time.Duration {
	if r.FirstToken.IsZero() {
		return 0
	}
	return r.FirstToken.Sub(r.Arrival)
}

// Errors returned by Submit or reported in Result.Err.
var (
	ErrClosed      = errors.New("engine: closed")
	ErrAborted     = errors.New("engine: request aborted")
	ErrEmptyPrompt = errors.New("engine: empty prompt")
	ErrMaxTokens   = errors.New("engine: max_tokens must be at least 1")
	// ErrTooLong means prompt plus max_tokens needs more KV blocks than the
	// engine has (in hybrid mode, counting what every KV-cache group may
	// hold at once), so the request could never run.
	ErrTooLong = errors.New("engine: request does not fit in the KV cache")
)

// Stats is a snapshot of the engine's counters and gauges.
type Stats struct {
	PrefixCacheQueries uint64 // prompt tokens looked up in the prefix cache
	PrefixCacheHits    uint64 // of which served from the cache
	RequestSuccess     uint64 // requests finished with FinishLength
	RequestAborted     uint64 // requests aborted (Abort or Close)
	RequestRejected    uint64 // Submit errors (bad input)
	PromptTokens       uint64 // prompt tokens of requests that generated their first token (vLLM counts them then)
	GenerationTokens   uint64 // tokens generated
	Preemptions        uint64 // running requests preempted for lack of blocks
	Steps              uint64 // scheduler steps run
	KVTransferTokens   uint64 // prompt tokens taken from a KV transfer instead of computed
	LoRALoads          uint64 // adapters loaded into a slot (Config.LoRA)
	LoRAEvictions      uint64 // adapters evicted from a slot to load another
	Running, Waiting   int
	// Deferred counts requests waiting outside the scheduler for their KV
	// transfer (a decode engine's WAITING_FOR_REMOTE_KVS; Engine.Defer).
	// vllm:num_requests_waiting includes them, under reason "deferred".
	Deferred int
	// HeldRequests and HeldBlocks count finished requests whose blocks are
	// held for a KV transfer (Request.HoldKV) and those blocks (in hybrid
	// mode, of every KV-cache group).
	HeldRequests, HeldBlocks int
	NumBlocks                int // KV-cache capacity in blocks
	FreeBlocks               int // blocks not referenced by a running request (may still hold a hash)
	CachedBlocks             int // blocks holding a hash (hittable), of every KV-cache group
}
