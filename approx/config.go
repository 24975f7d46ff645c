package approx

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/kvroute/kvroute/internal/jsonconf"
)

// Defaults applied to zero Config fields.
const (
	// DefaultTTL is how long an entry counts after the last decision that
	// routed its block to the endpoint: an engine evicts by capacity, but
	// traffic this router does not see (other routers, direct clients) and
	// restarts evict too, and nothing tells an approximate index. Dynamo's
	// approximate router (--no-router-kv-events) expires its predictions
	// after 120 s by default; this is the same order.
	DefaultTTL = 2 * time.Minute
	// DefaultGPUBlocks and DefaultEngineBlockSize make the capacity of an
	// endpoint with none configured: 31,250 blocks of 16 tokens (500,000
	// tokens), the per-server default of llm-d's approximate prefix
	// producer.
	DefaultGPUBlocks       = 31250
	DefaultEngineBlockSize = 16
	// DefaultMaxBytes bounds the whole index's memory.
	DefaultMaxBytes int64 = 64 << 20
	// minMaxBytes is the smallest MaxBytes: a few slots.
	minMaxBytes = 16 * slotBytes
	// CapacityFromEngine and CapacityFromConfig are the values of
	// Config.CapacityFrom.
	CapacityFromEngine = "engine"
	CapacityFromConfig = "config"
	// DefaultRefresh is how often the endpoints' KV-event stream states are
	// read again to decide each one's mode.
	DefaultRefresh = time.Second
)

// Capacity is what an engine can hold of its prefix cache: its GPU blocks
// plus the blocks it offloads to CPU memory. Sizing an approximate index to
// GPU memory alone while the engine keeps evicted blocks in CPU memory
// makes it forget prefixes the engine still serves (llm-d's approximate
// producer had that bug, llm-d/llm-d-router#1650: vLLM exports no CPU block
// count to tune from), so CPU offload is a field of its own.
type Capacity struct {
	// GPUBlocks is the engine's KV blocks in GPU memory (vLLM's
	// num_gpu_blocks, logged at start and in vllm:cache_config_info); at
	// most 2³¹.
	GPUBlocks int `json:"gpuBlocks"`
	// CPUBlocks is the blocks the engine offloads to CPU memory and serves
	// prefixes from (vLLM's native CPU offloading or LMCache's local CPU
	// backend: the offload size divided by one block's bytes); 0 without
	// offloading; at most 2³¹.
	CPUBlocks int `json:"cpuBlocks"`
	// BlockSize is the engine's block size in tokens (vLLM's
	// --block-size), at most 2²⁰; 0 means DefaultEngineBlockSize.
	BlockSize int `json:"blockSize"`
}

// maxCapacityBlocks and maxCapacityBlockSize bound a valid Capacity's
// block counts and block size, as package enginemetrics bounds those it
// reads from an engine: larger values are no cache an engine has, and
// within them Tokens cannot overflow.
const (
	maxCapacityBlocks    = 1 << 31
	maxCapacityBlockSize = 1 << 20
)

// Tokens is the capacity in tokens: (GPU + CPU blocks) × block size,
// negative counts taken as 0; it saturates at math.MaxInt64 for counts
// beyond the bounds a valid Capacity keeps (2³¹ blocks of each tier, 2²⁰
// tokens a block).
func (c Capacity) Tokens() int64 {
	bs := int64(c.BlockSize)
	if bs <= 0 {
		bs = DefaultEngineBlockSize
	}
	gpu, cpu := int64(max(c.GPUBlocks, 0)), int64(max(c.CPUBlocks, 0))
	if gpu > math.MaxInt64-cpu || gpu+cpu > math.MaxInt64/bs {
		return math.MaxInt64
	}
	return (gpu + cpu) * bs
}

// Blocks is the capacity in blocks of indexBlockSize tokens (the router's
// block size), at least 1 and at most math.MaxInt.
func (c Capacity) Blocks(indexBlockSize int) int {
	if indexBlockSize <= 0 {
		indexBlockSize = 64
	}
	return int(min(max(1, c.Tokens()/int64(indexBlockSize)), math.MaxInt))
}

func (c Capacity) validate(name string) error {
	for _, f := range []struct {
		key    string
		v, max int64
	}{
		{"gpuBlocks", int64(c.GPUBlocks), maxCapacityBlocks},
		{"cpuBlocks", int64(c.CPUBlocks), maxCapacityBlocks},
		{"blockSize", int64(c.BlockSize), maxCapacityBlockSize},
	} {
		switch {
		case f.v < 0:
			return fmt.Errorf("approx: %s: %s must be >= 0, got %d", name, f.key, f.v)
		case f.v > f.max:
			return fmt.Errorf("approx: %s: %s must be at most %d, got %d", name, f.key, f.max, f.v)
		}
	}
	switch {
	case c.GPUBlocks == 0 && c.CPUBlocks > 0:
		return fmt.Errorf("approx: %s: cpuBlocks without gpuBlocks: the GPU blocks are the engine's first tier, give both", name)
	case c.GPUBlocks == 0 && c.BlockSize > 0:
		return fmt.Errorf("approx: %s: blockSize without gpuBlocks: give both (a zero capacity is %d blocks of %d tokens)",
			name, DefaultGPUBlocks, DefaultEngineBlockSize)
	}
	return nil
}

// Config configures an Index. The zero Config is valid: approximate routing
// off (every endpoint whose stream is not live is routed blind), the mode
// table still kept.
type Config struct {
	// Enabled keeps an approximate prefix index for the endpoints whose
	// KV-event stream is not live. Off by default, so that a deployment
	// never runs approximate routing without asking for it.
	Enabled bool `json:"enabled"`
	// TTL is how long an entry counts after the last decision that routed
	// its block to the endpoint (default DefaultTTL).
	TTL time.Duration `json:"ttl"`
	// Capacity is the capacity of endpoints without an entry in Endpoints;
	// zero means DefaultGPUBlocks blocks of DefaultEngineBlockSize tokens
	// (a block size or CPU blocks without GPU blocks is an error).
	Capacity Capacity `json:"capacity"`
	// Endpoints are per-endpoint capacities by endpoint ID, overriding
	// Capacity (Index.SetCapacity changes them at run time, e.g. from the
	// engine's metrics).
	Endpoints map[string]Capacity `json:"endpoints"`
	// MaxBytes bounds the index's accounted memory over all endpoints
	// (default DefaultMaxBytes). An endpoint's share is MaxBytes divided by
	// the endpoints holding entries; above it its least recently routed
	// blocks are evicted (reason "memory").
	MaxBytes int64 `json:"maxBytes"`
	// CapacityFrom is where the capacity of an endpoint without an entry in
	// Endpoints comes from: CapacityFromEngine ("engine", the default) reads
	// it from the engine's own metrics when the index is given a source
	// (Options.Capacities: the gateway scrapes vLLM's
	// vllm:cache_config_info), falling back to Capacity when the engine's
	// is unknown; CapacityFromConfig ("config") never asks the engine.
	CapacityFrom string `json:"capacityFrom"`
	// Refresh is how often the endpoints' stream states are read again
	// (default DefaultRefresh); an endpoint whose events start flowing is
	// routed precisely, and its approximate entries dropped, within it.
	Refresh time.Duration `json:"refresh"`
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.TTL < 0:
		return c, fmt.Errorf("approx: ttl must be >= 0, got %v", c.TTL)
	case c.MaxBytes < 0 || (c.MaxBytes > 0 && c.MaxBytes < minMaxBytes):
		return c, fmt.Errorf("approx: maxBytes must be 0 (the default) or at least %d, got %d", minMaxBytes, c.MaxBytes)
	case c.Refresh < 0:
		return c, fmt.Errorf("approx: refresh must be >= 0, got %v", c.Refresh)
	case c.CapacityFrom != "" && c.CapacityFrom != CapacityFromEngine && c.CapacityFrom != CapacityFromConfig:
		return c, fmt.Errorf("approx: capacityFrom must be %q or %q, got %q", CapacityFromEngine, CapacityFromConfig, c.CapacityFrom)
	}
	if err := c.Capacity.validate("capacity"); err != nil {
		return c, err
	}
	for id, ep := range c.Endpoints {
		if id == "" {
			return c, errors.New("approx: endpoints: empty endpoint ID")
		}
		if err := ep.validate("endpoints[" + id + "]"); err != nil {
			return c, err
		}
		if ep.GPUBlocks == 0 {
			return c, fmt.Errorf("approx: endpoints[%s]: gpuBlocks is required", id)
		}
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Capacity.GPUBlocks == 0 {
		c.Capacity = Capacity{GPUBlocks: DefaultGPUBlocks, BlockSize: DefaultEngineBlockSize}
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Refresh == 0 {
		c.Refresh = DefaultRefresh
	}
	if c.CapacityFrom == "" {
		c.CapacityFrom = CapacityFromEngine
	}
	return c, nil
}

// Validate reports the first invalid field of c (New returns the same
// error).
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// LoadConfig decodes a JSON Config (absent keys mean the defaults; unknown
// keys are an error naming their path; durations are Go duration strings).
func LoadConfig(r io.Reader) (Config, error) {
	return jsonconf.Load(r, Config{}, jsonconf.Prefixed("approx: config"), Config.Validate)
}

type configFields Config

// UnmarshalJSON decodes c strictly wherever a Config is decoded: unknown
// keys are an error, durations are Go duration strings.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c with its durations as Go duration strings.
func (c Config) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(configFields(c)) }
