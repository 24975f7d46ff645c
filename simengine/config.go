package simengine

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// Defaults of Config.
const (
	DefaultNumGPUBlocks           = 2048
	DefaultMaxNumBatchedTokens    = 8192
	DefaultMaxNumSeqs             = 256
	DefaultPrefillTokensPerSecond = 10_000
	DefaultDecodeStep             = 10 * time.Millisecond
)

// DefaultStart is where a virtual clock starts when Config.Start is zero.
var DefaultStart = time.Unix(1_700_000_000, 0).UTC()

// Config describes one simulated engine. The zero value works (defaults above).
type Config struct {
	// Model is the served model name, used as the model_name metric label.
	Model string `json:"model"`
	// BlockSize is the number of tokens per KV block (vLLM --block-size).
	// Default kvindex.DefaultBlockSize, the router's: the two must agree.
	BlockSize int `json:"blockSize"`
	// NumGPUBlocks is the KV-cache capacity in blocks (vLLM --num-gpu-blocks-override).
	NumGPUBlocks int `json:"numGPUBlocks"`
	// NullBlock holds one of the NumGPUBlocks out of use, as vLLM's
	// BlockPool keeps its null block (block 0): NumGPUBlocks-1 blocks are
	// usable and vllm:kv_cache_usage_perc divides by NumGPUBlocks-1, as
	// BlockPool.get_usage does, so a router reading the gauge and the
	// cache_config_info num_gpu_blocks sees what a vLLM engine of that size
	// reports. Off by default, when all NumGPUBlocks are usable (the usage
	// of a vLLM pool of NumGPUBlocks+1 blocks) and simulations keep their
	// capacity. Needs NumGPUBlocks >= 2.
	NullBlock bool `json:"nullBlock"`
	// MaxNumBatchedTokens is the token budget of one scheduler step; prefills
	// longer than the remaining budget are chunked (--max-num-batched-tokens).
	MaxNumBatchedTokens int `json:"maxNumBatchedTokens"`
	// MaxNumSeqs caps the number of running requests (--max-num-seqs), as
	// vLLM's scheduler does: at most MaxNumSeqs requests are in the running
	// queue (prefilling or decoding); the rest wait in FCFS order, and one
	// leaves the waiting queue only when a running one finishes, is aborted
	// or is preempted. Zero means DefaultMaxNumSeqs, 256, vLLM's default for
	// the OpenAI server on GPUs under 70 GiB (1024 above).
	MaxNumSeqs int `json:"maxNumSeqs"`
	// PrefillTokensPerSecond is the compute speed: every token scheduled in a
	// step (prefill chunk or decode token) costs 1/PrefillTokensPerSecond.
	PrefillTokensPerSecond float64 `json:"prefillTokensPerSecond"`
	// DecodeStep is the fixed cost of one scheduler step (one forward pass).
	// A step lasts (DecodeStep + tokens/PrefillTokensPerSecond) × TimeScale.
	DecodeStep time.Duration `json:"decodeStep"`
	// TimeScale multiplies every step duration (0 means 1): 0.1 runs ten times
	// faster than the modelled engine, 2 twice slower.
	TimeScale float64 `json:"timeScale"`

	// Start is the initial time of a virtual clock (zero = DefaultStart). Ignored
	// in real-time mode, whose clock is time.Now.
	Start time.Time `json:"-"`
	// Sink receives KV-event batches; nil disables event generation, like vLLM
	// without enable_kv_cache_events.
	Sink EventSink `json:"-"`

	// Hybrid, when set, runs a hybrid-attention model: sliding-window
	// groups and optionally a Mamba group beside full attention, all
	// allocating from the NumGPUBlocks blocks (hybrid.go).
	Hybrid *HybridConfig `json:"hybrid,omitempty"`

	// LoRA, when set, models vLLM's LoRA adapter slots: a cap
	// (--max-loras), a load time and LRU eviction (lora.go).
	LoRA *LoRAConfig `json:"lora,omitempty"`
}

// Options are an Engine's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the engine's observability, as every kvroute component takes
	// it: Registerer receives the engine's vllm:* metrics (nil registers
	// nothing; Close unregisters them), Logger the lifecycle logs (nil
	// discards). The engine has no spans, and runs on its own clock (the
	// virtual one of New, the wall clock of NewRealTime): TracerProvider
	// and Clock are not read.
	telemetry.Set
}

// ErrBadConfig is wrapped by every Config validation error.
var ErrBadConfig = errors.New("engine: invalid config")

// withDefaults fills zero fields and validates the result.
func (c Config) withDefaults() (Config, error) {
	if c.BlockSize == 0 {
		c.BlockSize = kvindex.DefaultBlockSize
	}
	if c.NumGPUBlocks == 0 {
		c.NumGPUBlocks = DefaultNumGPUBlocks
	}
	if c.MaxNumBatchedTokens == 0 {
		c.MaxNumBatchedTokens = DefaultMaxNumBatchedTokens
	}
	if c.MaxNumSeqs == 0 {
		c.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if c.PrefillTokensPerSecond == 0 {
		c.PrefillTokensPerSecond = DefaultPrefillTokensPerSecond
	}
	if c.DecodeStep == 0 {
		c.DecodeStep = DefaultDecodeStep
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if c.Start.IsZero() {
		c.Start = DefaultStart
	}
	if c.Hybrid != nil {
		h, err := c.Hybrid.withDefaults()
		if err != nil {
			return c, err
		}
		c.Hybrid = &h
	}
	if c.LoRA != nil {
		l, err := c.LoRA.withDefaults()
		if err != nil {
			return c, err
		}
		c.LoRA = &l
	}
	switch {
	case c.BlockSize < 1 || c.BlockSize > 1<<16:
		return c, fmt.Errorf("%w: blockSize %d not in [1, 65536]", ErrBadConfig, c.BlockSize)
	case c.NumGPUBlocks < 1 || c.NumGPUBlocks > 1<<24:
		return c, fmt.Errorf("%w: numGPUBlocks %d not in [1, 16777216]", ErrBadConfig, c.NumGPUBlocks)
	case c.NullBlock && c.NumGPUBlocks < 2:
		return c, fmt.Errorf("%w: nullBlock needs numGPUBlocks >= 2 (one is the null block), got %d", ErrBadConfig, c.NumGPUBlocks)
	case c.MaxNumBatchedTokens < 1:
		return c, fmt.Errorf("%w: maxNumBatchedTokens %d < 1", ErrBadConfig, c.MaxNumBatchedTokens)
	case c.MaxNumSeqs < 1:
		return c, fmt.Errorf("%w: maxNumSeqs %d < 1", ErrBadConfig, c.MaxNumSeqs)
	case !(c.PrefillTokensPerSecond > 0) || c.PrefillTokensPerSecond > 1e12:
		return c, fmt.Errorf("%w: prefillTokensPerSecond %v not in (0, 1e12]", ErrBadConfig, c.PrefillTokensPerSecond)
	case c.DecodeStep < 0:
		return c, fmt.Errorf("%w: decodeStep %v < 0", ErrBadConfig, c.DecodeStep)
	case !(c.TimeScale > 0) || c.TimeScale > 1e6:
		return c, fmt.Errorf("%w: timeScale %v not in (0, 1e6]", ErrBadConfig, c.TimeScale)
	}
	return c, nil
}

// stepDuration models one forward pass over tokens scheduled tokens.
func (c *Config) stepDuration(tokens int) time.Duration {
	d := (float64(c.DecodeStep) + float64(tokens)/c.PrefillTokensPerSecond*float64(time.Second)) * c.TimeScale
	if d < 1 {
		return 1 // time must move forward, or a virtual clock would spin
	}
	return durationOf(d)
}

// durationOf converts ns nanoseconds to a Duration, saturating at the
// longest one: a float past int64's range converts to an arbitrary value
// (negative on amd64), which would end a step before it began.
func durationOf(ns float64) time.Duration {
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
