package disagg

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/render"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultNonCachedTokens is the uncached prompt tokens on the decode
	// endpoint at or above which a request is disaggregated. llm-d's
	// prefix-based decider compares the same quantity with its
	// nonCachedTokens, whose shipped value 0 turns disaggregation off
	// (here: do not configure the profile); this default is Dynamo's
	// documented max_local_prefill_length (1000), below which a prompt is
	// cheaper to prefill where it decodes than to transfer.
	DefaultNonCachedTokens = 1000
	// DefaultDecodeQueueRequests is the number of open requests at which a
	// decode endpoint's load score reaches 0.
	DefaultDecodeQueueRequests = 128
	// DefaultDecodeCacheWeight is the decode pick's weight of the cached share of
	// the prompt.
	DefaultDecodeCacheWeight = 1.0
	// DefaultDecodeLoadWeight is the decode pick's weight of the free share of
	// its decode capacity.
	DefaultDecodeLoadWeight = 1.0
	// DefaultOutputTokens is the output tokens a request is expected to
	// generate when its body names no max_tokens (max_completion_tokens,
	// max_output_tokens): what its decode endpoint is charged until it ends.
	DefaultOutputTokens = 512
	// DefaultDecodeQueueOutputTokens is the in-flight output tokens at which
	// a decode endpoint's load score reaches 0: DefaultDecodeQueueRequests
	// requests of DefaultOutputTokens.
	DefaultDecodeQueueOutputTokens = DefaultDecodeQueueRequests * DefaultOutputTokens
	// DefaultPrefillTokensPerSecond is the cost rule's prefill throughput of
	// one endpoint: the router's calibrated default
	// (affinity.DefaultPeakPrefillThroughput).
	DefaultPrefillTokensPerSecond = affinity.DefaultPeakPrefillThroughput
	// DefaultTransferTokensPerSecond is the cost rule's KV-transfer rate:
	// Llama-3.1-8B in bf16 (131,072 bytes of KV per token) over NIXL on
	// RDMA at 25 GB/s effective, 190,735 tokens/s (5.2 µs per token).
	DefaultTransferTokensPerSecond = 25e9 / 131072
	// DefaultTransferLatency is the cost rule's fixed cost of one transfer
	// (the decode engine's read request and its completion notification).
	DefaultTransferLatency = time.Millisecond
	// DefaultDecodeStallWeight prices a second of stall of each running
	// request on the decode endpoint as a second of the request's own time
	// to first token: the rule then minimises the latency all of them add.
	DefaultDecodeStallWeight = 1.0
	// DefaultBelowThresholdStallWeight prices, for a request below
	// NonCachedTokens, a second of stall of each running request on the
	// decode endpoint as 1/20 of a second of the request's own time to
	// first token: enough for a decode endpoint with tens of running
	// requests to hand a short prompt to an idle prefill endpoint, which
	// keeps the decode steps short, and too little to send it to a prefill
	// endpoint with a long prompt queued. The routing simulation's P/D
	// study runs at this default (bench/results/routesim-pd.md).
	DefaultBelowThresholdStallWeight = 0.05
	// DefaultDecodeStallCap bounds the priced stall at four times the
	// prefill's own time. Uncapped, the stall of tens of running requests
	// outweighs any prefill queue, so on a fleet with few prefill
	// endpoints every long prompt is split while their queue grows to tens
	// of seconds; capped, a long prompt accepts a prefill queue of at most
	// about four of its own prefills before it prefills on its decode
	// endpoint. In the routing simulation's P/D study the cap changes no
	// target row on the stated 6P+2D fleet and cuts the decider's TTFT p90
	// on 2P+6D and 3P+5D fleets several times (bench/results/routesim-pd.md,
	// "Sensitivity").
	DefaultDecodeStallCap = 4.0
)

// DefaultSplitAPIs are the APIs whose requests the Profile may split when
// Config.SplitAPIs is empty: completions and chat completions, the routes
// every routing sidecar splits (llm-d's long did only these).
var DefaultSplitAPIs = []render.API{render.APICompletions, render.APIChatCompletions}

// splitAPINames are the API names Config.SplitAPIs may hold: every API
// kvroute routes (render.API), named as in the gateway's api label.
var splitAPINames = []render.API{render.APICompletions, render.APIChatCompletions, render.APIMessages, render.APIResponses}

// Config configures the Profile (the gateway's "disagg" block).
type Config struct {
	// NonCachedTokens is the decider's threshold: a request whose decode
	// endpoint would have to compute at least this many uncached prompt
	// tokens is disaggregated (a prefill endpoint computes them and the
	// KV cache is transferred); below it the decode endpoint prefills
	// locally. 0 means DefaultNonCachedTokens; negative disaggregates every
	// request that has a prompt.
	NonCachedTokens int64 `json:"nonCachedTokens"`
	// MaxPrefillQueueTokens is the optional prefill-load rule, after
	// Dynamo's conditional disaggregation (remote prefill only while the
	// prefill queue is short): a request is prefilled locally when even the
	// chosen prefill endpoint already has this many prompt tokens in flight.
	// 0, the default, disables the rule.
	MaxPrefillQueueTokens int64 `json:"maxPrefillQueueTokens"`
	// DecodeQueueRequests is the decode pick's load scale: an endpoint's
	// load score is 1 − min(open requests, DecodeQueueRequests) /
	// DecodeQueueRequests. 0 means DefaultDecodeQueueRequests.
	DecodeQueueRequests int64 `json:"decodeQueueRequests"`
	// DecodeCacheWeight weighs the cached share of the prompt on a decode
	// candidate in its score; 0 means DefaultDecodeCacheWeight.
	DecodeCacheWeight float64 `json:"decodeCacheWeight"`
	// DecodeLoadWeight weighs a decode candidate's load score; 0 means
	// DefaultDecodeLoadWeight.
	DecodeLoadWeight float64 `json:"decodeLoadWeight"`
	// DecodeQueueOutputTokens is the decode pick's load scale in output
	// tokens: the load score is 1 − the larger of min(in-flight output
	// tokens, DecodeQueueOutputTokens) / DecodeQueueOutputTokens and the
	// open-request share (DecodeQueueRequests), the resource a decode
	// endpoint runs out of first. One request is charged at most this
	// many. 0 means DefaultDecodeQueueOutputTokens.
	DecodeQueueOutputTokens int64 `json:"decodeQueueOutputTokens"`
	// DefaultOutputTokens is the output tokens charged to the decode
	// endpoint of a request whose body names no positive max_tokens
	// (render.MaxTokens); 0 means DefaultOutputTokens.
	DefaultOutputTokens int64 `json:"defaultOutputTokens"`

	// CostRule turns the cost rule on (see the package documentation): a
	// request whose uncached tokens reach NonCachedTokens is split only
	// when its estimated time to first token through the prefill endpoint
	// (that endpoint's queued prompt tokens and its own uncached tokens at
	// PrefillTokensPerSecond, then the transfer) beats prefilling it on the
	// decode endpoint (that endpoint's queued prompt tokens and the
	// request's, plus the stall DecodeStallWeight prices). Off, the
	// default, every request at or above NonCachedTokens is split, as
	// llm-d's prefix-based decider does. The fields below are its knobs.
	CostRule bool `json:"costRule"`
	// PrefillTokensPerSecond is one endpoint's prefill throughput in the
	// estimates; 0 means DefaultPrefillTokensPerSecond.
	PrefillTokensPerSecond float64 `json:"prefillTokensPerSecond"`
	// TransferTokensPerSecond is the KV transfer's rate in prompt tokens
	// per second (link bandwidth / KV bytes per token); 0 means
	// DefaultTransferTokensPerSecond.
	TransferTokensPerSecond float64 `json:"transferTokensPerSecond"`
	// TransferLatency is each transfer's fixed cost; 0 means
	// DefaultTransferLatency, negative none (WithDefaults keeps it
	// negative, the estimates count 0).
	TransferLatency time.Duration `json:"transferLatency"`
	// DecodeStallWeight prices the stall a local prefill puts on the decode
	// endpoint's running requests: the local estimate gains DecodeStallWeight
	// × open requests × the prefill's own time (each running request waits
	// that long for its next token). 0 means DefaultDecodeStallWeight;
	// negative counts no stall, and the rule then minimises the request's
	// own time to first token (which, on a decode endpoint busy decoding,
	// queues the requests that must prefill there behind long prompts).
	DecodeStallWeight float64 `json:"decodeStallWeight"`
	// BelowThresholdStallWeight extends the cost rule below the threshold:
	// a request whose uncached tokens are below NonCachedTokens (which the
	// threshold alone keeps local) is split when the cost rule, with the
	// stall priced at BelowThresholdStallWeight instead of
	// DecodeStallWeight, estimates splitting faster: its decode endpoint's
	// queued prompt tokens, or the stall its own prefill puts on the
	// running requests there, cost more than the prefill endpoint's queue
	// and the transfer. Such splits are counted with reason decode_busy.
	// Only with CostRule. 0 means DefaultBelowThresholdStallWeight;
	// negative turns the extension off (below the threshold nothing is
	// split, as without the cost rule).
	BelowThresholdStallWeight float64 `json:"belowThresholdStallWeight"`
	// DecodeStallCap bounds the stall the cost rule prices, in multiples of
	// the prefill's own time: the local estimate gains at most
	// DecodeStallCap × that time, however many requests run on the decode
	// endpoint (at either weight). It keeps a small prefill pool from
	// taking every long prompt while its queue grows without bound. 0 means
	// DefaultDecodeStallCap; negative means no cap.
	DecodeStallCap float64 `json:"decodeStallCap"`

	// SplitAPIs lists the APIs whose requests may be split (render.API
	// names: "completions", "chat_completions", "messages", "responses"); a
	// request of another API stays local, counted with reason api, so that
	// no prefill endpoint is charged a prompt it never gets. It must name
	// what the decode pods' routing sidecar (or the gateway's exchange
	// mode) splits: kvroute's sidecar and exchange split completions, chat
	// completions, Responses (/v1/responses, whose prefill request asks
	// for one token with max_output_tokens; a vLLM with kv_transfer_params
	// on its Responses API is needed, else every such prefill falls back to
	// a local one) and Messages (/v1/messages), as llm-d's newer routing
	// sidecar does. A sidecar that passes an API's requests on unsplit
	// leaves the prefill endpoint charged for nothing. Empty means
	// DefaultSplitAPIs. A request naming no API (pre-tokenized prompts
	// from a Go caller) may always be split.
	SplitAPIs []render.API `json:"splitAPIs,omitempty"`
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("disagg: invalid configuration")

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.MaxPrefillQueueTokens < 0:
		return fmt.Errorf("%w: maxPrefillQueueTokens %d is negative", ErrInvalidConfig, c.MaxPrefillQueueTokens)
	case c.DecodeQueueRequests < 0:
		return fmt.Errorf("%w: decodeQueueRequests %d is negative", ErrInvalidConfig, c.DecodeQueueRequests)
	case c.DecodeCacheWeight < 0 || math.IsNaN(c.DecodeCacheWeight) || math.IsInf(c.DecodeCacheWeight, 0):
		return fmt.Errorf("%w: decodeCacheWeight %v is not a finite non-negative number", ErrInvalidConfig, c.DecodeCacheWeight)
	case c.DecodeLoadWeight < 0 || math.IsNaN(c.DecodeLoadWeight) || math.IsInf(c.DecodeLoadWeight, 0):
		return fmt.Errorf("%w: decodeLoadWeight %v is not a finite non-negative number", ErrInvalidConfig, c.DecodeLoadWeight)
	case c.DecodeQueueOutputTokens < 0:
		return fmt.Errorf("%w: decodeQueueOutputTokens %d is negative", ErrInvalidConfig, c.DecodeQueueOutputTokens)
	case c.DefaultOutputTokens < 0:
		return fmt.Errorf("%w: defaultOutputTokens %d is negative", ErrInvalidConfig, c.DefaultOutputTokens)
	case !finiteNonNegative(c.PrefillTokensPerSecond):
		return fmt.Errorf("%w: prefillTokensPerSecond %v is not a finite non-negative number", ErrInvalidConfig, c.PrefillTokensPerSecond)
	case !finiteNonNegative(c.TransferTokensPerSecond):
		return fmt.Errorf("%w: transferTokensPerSecond %v is not a finite non-negative number", ErrInvalidConfig, c.TransferTokensPerSecond)
	case math.IsNaN(c.DecodeStallWeight) || math.IsInf(c.DecodeStallWeight, 0):
		return fmt.Errorf("%w: decodeStallWeight %v is not a finite number", ErrInvalidConfig, c.DecodeStallWeight)
	case math.IsNaN(c.BelowThresholdStallWeight) || math.IsInf(c.BelowThresholdStallWeight, 0):
		return fmt.Errorf("%w: belowThresholdStallWeight %v is not a finite number", ErrInvalidConfig, c.BelowThresholdStallWeight)
	case math.IsNaN(c.DecodeStallCap) || math.IsInf(c.DecodeStallCap, 0):
		return fmt.Errorf("%w: decodeStallCap %v is not a finite number", ErrInvalidConfig, c.DecodeStallCap)
	}
	for i, api := range c.SplitAPIs {
		if !slices.Contains(splitAPINames, api) {
			return fmt.Errorf("%w: splitAPIs[%d] %q is not an API (one of %q)", ErrInvalidConfig, i, api, splitAPINames)
		}
		if slices.Contains(c.SplitAPIs[:i], api) {
			return fmt.Errorf("%w: splitAPIs[%d] %q is listed twice", ErrInvalidConfig, i, api)
		}
	}
	return nil
}

// SplitsAPI reports whether a request of api may be split: api is in
// SplitAPIs (DefaultSplitAPIs when empty), or "" (a request naming no
// API, pre-tokenized prompts from a Go caller).
func (c Config) SplitsAPI(api render.API) bool {
	if api == "" {
		return true
	}
	if len(c.SplitAPIs) == 0 {
		return slices.Contains(DefaultSplitAPIs, api)
	}
	return slices.Contains(c.SplitAPIs, api)
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.NonCachedTokens == 0 {
		c.NonCachedTokens = DefaultNonCachedTokens
	}
	if c.DecodeQueueRequests == 0 {
		c.DecodeQueueRequests = DefaultDecodeQueueRequests
	}
	if c.DecodeCacheWeight == 0 {
		c.DecodeCacheWeight = DefaultDecodeCacheWeight
	}
	if c.DecodeLoadWeight == 0 {
		c.DecodeLoadWeight = DefaultDecodeLoadWeight
	}
	if c.DecodeQueueOutputTokens == 0 {
		c.DecodeQueueOutputTokens = DefaultDecodeQueueOutputTokens
	}
	if c.DefaultOutputTokens == 0 {
		c.DefaultOutputTokens = DefaultOutputTokens
	}
	if c.PrefillTokensPerSecond == 0 {
		c.PrefillTokensPerSecond = DefaultPrefillTokensPerSecond
	}
	if c.TransferTokensPerSecond == 0 {
		c.TransferTokensPerSecond = DefaultTransferTokensPerSecond
	}
	// Negative DecodeStallWeight, TransferLatency,
	// BelowThresholdStallWeight and DecodeStallCap stay negative (none,
	// off):
	// WithDefaults is idempotent, and the estimates read them as 0.
	if c.DecodeStallWeight == 0 {
		c.DecodeStallWeight = DefaultDecodeStallWeight
	}
	if c.TransferLatency == 0 {
		c.TransferLatency = DefaultTransferLatency
	}
	if c.BelowThresholdStallWeight == 0 {
		c.BelowThresholdStallWeight = DefaultBelowThresholdStallWeight
	}
	if c.DecodeStallCap == 0 {
		c.DecodeStallCap = DefaultDecodeStallCap
	}
	if len(c.SplitAPIs) == 0 {
		c.SplitAPIs = slices.Clone(DefaultSplitAPIs) // a copy: the result's to change
	}
	return c
}

func finiteNonNegative(x float64) bool { return x >= 0 && !math.IsInf(x, 0) }

// LoadConfig reads a Config from JSON (unknown keys are rejected) and
// validates it.
func LoadConfig(r io.Reader) (Config, error) {
	return jsonconf.Load(r, Config{}, jsonconf.Under(ErrInvalidConfig), Config.Validate)
}

type configFields Config

// UnmarshalJSON decodes c, rejecting unknown keys.
func (c *Config) UnmarshalJSON(data []byte) error {
	return jsonconf.Unmarshal(data, (*configFields)(c))
}

// MarshalJSON encodes c.
func (c Config) MarshalJSON() ([]byte, error) { return jsonconf.Marshal(configFields(c)) }
