package sim

import (
	"fmt"
	"time"

	"github.com/kvroute/kvroute/disagg"
)

// PDPolicy names one way of serving the P/D study's traffic.
type PDPolicy string

// The P/D study's policies.
const (
	// PDAggregated is kvroute's default Router over Prefill + Decode
	// engines that all prefill and decode (role both): the same GPUs,
	// not split.
	PDAggregated PDPolicy = "aggregated"
	// PDAlways splits every request: kvroute picks a decode endpoint among
	// the decode pool and a prefill endpoint among the prefill pool.
	PDAlways PDPolicy = "always-disaggregated"
	// PDDecider is kvroute's P/D Profile: pick the decode endpoint, split
	// only when the prompt tokens it does not hold exceed the decider's
	// threshold, then pick the prefill endpoint (pd_policy.go).
	PDDecider PDPolicy = "kvroute-decider"
	// PDDynamo is Dynamo's conditional disaggregation (pd_dynamo.go):
	// Dynamo's KV-router cost model picks the decode worker and the prefill
	// worker; the request is prefilled locally on the decode worker when
	// its isl_or_load policy says so.
	PDDynamo PDPolicy = "dynamo-conditional"
)

// AllPDPolicies lists the P/D study's policies in report order.
var AllPDPolicies = []PDPolicy{PDAggregated, PDAlways, PDDecider, PDDynamo}

// PDLoads are the P/D study's loads, as multiples of the measured capacity.
var PDLoads = []float64{0.5, 0.75, 1, 1.25}

// KVTransfer is the time a decode engine takes to pull a prompt's KV
// from its prefiller: Latency + tokens × BytesPerToken / Bandwidth, one
// transfer at a time per decode engine (its inbound link), in parallel
// with its forward passes (NIXL's transfers are asynchronous).
type KVTransfer struct {
	// BytesPerToken is the KV cache of one token over all layers.
	BytesPerToken int `json:"bytesPerToken"`
	// BandwidthGBps is the link's effective bandwidth in GB/s (10⁹ bytes).
	BandwidthGBps float64 `json:"bandwidthGBps"`
	// Latency is each transfer's fixed cost (the decoder's read request,
	// its completion notification).
	Latency time.Duration `json:"latency"`
}

// DefaultKVTransfer is Llama-3.1-8B in bf16 — 32 layers × 8 KV heads ×
// 128 dimensions × 2 (K and V) × 2 bytes = 131,072 bytes per token — over
// NIXL on RDMA at 25 GB/s effective (half the line rate of one 400 Gb/s
// NIC), with 1 ms per transfer: 5.2 µs per token, about 1/19 of the
// engine's 100 µs of prefill compute per token.
func DefaultKVTransfer() KVTransfer {
	return KVTransfer{BytesPerToken: 131072, BandwidthGBps: 25, Latency: time.Millisecond}
}

// time is the transfer time of tokens tokens.
func (k KVTransfer) time(tokens int) time.Duration {
	return k.Latency + time.Duration(float64(tokens)*float64(k.BytesPerToken)/(k.BandwidthGBps*1e9)*float64(time.Second))
}

// PDWorkload is the P/D study's traffic: chat sessions whose first turn
// starts with one of a few long shared system prompts and whose later
// turns resend the conversation so far plus a new user message, mixed with
// one-off long documents (a fresh document and a question about it).
type PDWorkload struct {
	// Requests is the run's length: chat turns plus documents.
	Requests int `json:"requests"`
	// DocumentFraction is the share of requests that are documents.
	DocumentFraction float64 `json:"documentFraction"`
	// SystemPrompts shared system prompts of SystemTokens each; sessions
	// of Turns turns, each adding UserTokens; the next turn comes ThinkTime
	// (mean of an exponential) after the previous answer ended.
	SystemPrompts int           `json:"systemPrompts"`
	SystemTokens  int           `json:"systemTokens"`
	UserTokens    int           `json:"userTokens"`
	Turns         int           `json:"turns"`
	ThinkTime     time.Duration `json:"thinkTime"`
	// DocumentTokens is each document's length (with its question).
	DocumentTokens int `json:"documentTokens"`
	// OutputTokens is every answer's length.
	OutputTokens int `json:"outputTokens"`
}

// DefaultPDWorkload is 2,000 requests, a quarter of them 8,192-token
// documents, the rest 4-turn chats on 8 system prompts of 4,096 tokens
// with 256-token user messages, 2 s think time, 256-token answers.
func DefaultPDWorkload() PDWorkload {
	return PDWorkload{Requests: 2000, DocumentFraction: 0.25, SystemPrompts: 8, SystemTokens: 4096, UserTokens: 256,
		Turns: 4, ThinkTime: 2 * time.Second, DocumentTokens: 8192, OutputTokens: 256}
}

// PDDecider returns package disagg's configuration for the
// kvroute-decider policy on c's fleet: the split threshold
// (nonCachedTokens) and prefill-load rule of c.Decider, the cost rule on,
// its throughputs the deployment's own — an engine's prefill compute
// (Fleet.PrefillTokensPerSecond) and the KV link (Transfer) — as an
// operator configures them.
func (c PDConfig) PDDecider() disagg.Config {
	d := c.Decider
	if d.PrefillTokensPerSecond == 0 {
		d.PrefillTokensPerSecond = c.Base.Fleet.PrefillTokensPerSecond
	}
	if d.TransferTokensPerSecond == 0 && c.Transfer.BytesPerToken > 0 {
		d.TransferTokensPerSecond = c.Transfer.BandwidthGBps * 1e9 / float64(c.Transfer.BytesPerToken)
	}
	if d.TransferLatency == 0 {
		d.TransferLatency = c.Transfer.Latency
		if d.TransferLatency == 0 {
			d.TransferLatency = -1 // none
		}
	}
	return d
}

// DynamoDisaggConfig is Dynamo's conditional disaggregation as the study
// models it, from its documentation (--router-conditional-disagg, the
// isl_or_load policy of --router-conditional-disagg-config) and its
// router's conditional_disagg source: the request stays on the decode
// worker (bypasses remote prefill) when
//
//	eff_isl = prompt tokens − the decode worker's cached prefix
//	eff_isl < EffISLThreshold and eff_isl / prompt tokens < EffISLRatio   (isl_bounding)
//	or the prefill worker the router would pick is busy:
//	its active prefill tokens > QueueThreshold × max_num_batched_tokens     (prefill_load)
//
// with the source's defaults (2,048 tokens, 0.7) and the router queue's
// documented 4.0. Both workers are picked by Dynamo's KV-router cost
// model (dynamo.go) over their pool.
type DynamoDisaggConfig struct {
	EffISLThreshold int     `json:"effIslThreshold"`
	EffISLRatio     float64 `json:"effIslRatio"`
	QueueThreshold  float64 `json:"queueThreshold"`
	// NoLoad turns the prefill_load half off (isl_bounding alone).
	NoLoad bool `json:"noLoad,omitempty"`
}

// DefaultDynamoDisagg is isl_or_load at the source's defaults.
func DefaultDynamoDisagg() DynamoDisaggConfig {
	return DynamoDisaggConfig{EffISLThreshold: 2048, EffISLRatio: 0.7, QueueThreshold: 4}
}

// PDConfig is one P/D run without its policy.
type PDConfig struct {
	// Base supplies the engine shape (Fleet, its Engines ignored), the
	// event delay, the seed and Dynamo's cost-model parameters.
	Base Config `json:"base"`
	// Prefill and Decode are the pools' sizes; the aggregated policy runs
	// Prefill + Decode engines of role both.
	Prefill  int        `json:"prefill"`
	Decode   int        `json:"decode"`
	Transfer KVTransfer `json:"transfer"`
	Workload PDWorkload `json:"workload"`
	// Decider is package disagg's configuration of the kvroute-decider
	// policy; PDDecider fills its throughputs from the fleet.
	Decider disagg.Config      `json:"decider"`
	Dynamo  DynamoDisaggConfig `json:"dynamo"`
	// Capacity is the aggregated fleet's capacity in requests per second
	// on this workload (MeasurePDCapacity); Load multiplies it into the
	// offered rate.
	Capacity float64 `json:"capacity"`
	Load     float64 `json:"load"`
}

// DefaultPDConfig is 6 prefill + 2 decode engines (8 aggregated), each
// with 8,192 KV blocks of 64 tokens (524,288 tokens: 64 GiB at 128 KiB
// per token, what an 80 GB GPU has left beside an 8B model's weights), the
// rest of the default fleet's shape, the default workload, KV transfer and
// Dynamo rule, and package disagg's decider at its default threshold
// (1,000 uncached tokens) with its cost rule on and no prefill-load rule.
// The pools are sized to the
// traffic: prompt tokens are about 90 % of the tokens the aggregated fleet
// computes on it (4.6M prompt against 0.5M answer tokens a run), so the
// prefill pool has 6 of the 8 GPUs, and 2 decoders hold the answers' KV.
// The sensitivity sweep (DefaultPDVariants) runs the other splits.
func DefaultPDConfig(load float64) PDConfig {
	base := DefaultConfig(MultiTurn, 1)
	base.GatewayReplicas = 1
	base.Fleet.NumGPUBlocks = 8192
	return PDConfig{Base: base, Prefill: 6, Decode: 2, Transfer: DefaultKVTransfer(), Workload: DefaultPDWorkload(),
		Decider: disagg.Config{NonCachedTokens: 1000, CostRule: true}, Dynamo: DefaultDynamoDisagg(), Load: load}
}

func (c PDConfig) validate() error {
	w, f := c.Workload, c.Base.Fleet
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: pd: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Prefill < 1 || c.Decode < 1:
		return bad("pools of %d prefill and %d decode engines: each needs one", c.Prefill, c.Decode)
	case w.Requests < 1 || w.SystemPrompts < 1 || w.SystemTokens < 1 || w.UserTokens < 1 || w.Turns < 1 || w.DocumentTokens < 2 || w.OutputTokens < 1:
		return bad("workload sizes must be positive: %+v", w)
	case !(w.DocumentFraction >= 0 && w.DocumentFraction <= 1):
		return bad("documentFraction %v not in [0, 1]", w.DocumentFraction)
	case w.ThinkTime < 0:
		return bad("thinkTime %v < 0", w.ThinkTime)
	case f.BlockSize < 1 || f.NumGPUBlocks < 1 || f.MaxNumBatchedTokens < 1 || f.MaxNumSeqs < 1 || !(f.PrefillTokensPerSecond > 0):
		return bad("engine shape must be positive: %+v", f)
	case c.Transfer.BytesPerToken < 0 || !(c.Transfer.BandwidthGBps > 0) || c.Transfer.Latency < 0:
		return bad("transfer %+v: bandwidth must be positive, the rest not negative", c.Transfer)
	case !(c.Capacity > 0) || !(c.Load > 0):
		return bad("capacity %v and load %v must be positive", c.Capacity, c.Load)
	}
	longest := w.SystemTokens + w.Turns*(w.UserTokens+w.OutputTokens)
	if d := w.DocumentTokens + w.OutputTokens; d > longest {
		longest = d
	}
	if blocks := (longest + f.BlockSize - 1) / f.BlockSize; blocks > f.NumGPUBlocks {
		return bad("the longest request needs %d blocks, an engine has %d", blocks, f.NumGPUBlocks)
	}
	return nil
}
