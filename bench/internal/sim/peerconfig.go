package sim

import (
	"errors"
	"math"
	"time"
)

// PeerConfig holds the parameters of the peer systems' routing policies.
type PeerConfig struct {
	Dynamo DynamoConfig `json:"dynamo"`
	SGLang SGLangConfig `json:"sglang"`
}

// DynamoConfig is the Dynamo KV router's cost model. All quantities are KV
// blocks.
type DynamoConfig struct {
	// OverlapScoreCredit credits each prompt block the worker holds on the
	// device (GPU) against its prefill cost. Dynamo's default 1.0.
	OverlapScoreCredit float64 `json:"overlapScoreCredit"`
	// HostCacheHitWeight and DiskCacheHitWeight credit blocks held in host
	// memory and on disk (0.75 and 0.25 by default; the simulated engines
	// have no offload tier, so they never apply here).
	HostCacheHitWeight float64 `json:"hostCacheHitWeight"`
	DiskCacheHitWeight float64 `json:"diskCacheHitWeight"`
	// PrefillLoadScale weighs the adjusted prefill blocks against the
	// decode blocks. Default 1.0.
	PrefillLoadScale float64 `json:"prefillLoadScale"`
	// OverlapCreditDecay, when > 0, shrinks the device credit of a worker
	// whose prefill backlog exceeds the least-loaded worker's by
	// 1 / (1 + decay × excess ÷ the request's blocks). Off (0) by default.
	OverlapCreditDecay float64 `json:"overlapCreditDecay"`
	// Temperature 0 picks the lowest cost; > 0 samples a softmax over the
	// normalised negated costs. Default 0.
	Temperature float64 `json:"temperature"`
	// PredictedTTL is how long the side index of the router's own decisions
	// remembers that a worker was sent a prompt (covering the gap before its
	// events arrive); 0 disables it. Default 5 s.
	PredictedTTL time.Duration `json:"predictedTTL"`
}

// SGLangConfig is the SGLang model gateway's cache_aware policy.
type SGLangConfig struct {
	// CacheThreshold is the prefix match ratio (matched ÷ prompt tokens)
	// above which the request goes to the best-matching worker. Default 0.3.
	CacheThreshold float64 `json:"cacheThreshold"`
	// BalanceAbsThreshold and BalanceRelThreshold: the pool is imbalanced
	// when max − min in-flight requests > BalanceAbsThreshold and max >
	// BalanceRelThreshold × min. Defaults 64 and 1.5.
	BalanceAbsThreshold int     `json:"balanceAbsThreshold"`
	BalanceRelThreshold float64 `json:"balanceRelThreshold"`
	// EvictionInterval is how often each worker's approximate tree is cut
	// back (least recently used leaves first) to MaxTreeSize tokens.
	// Defaults 60 s and 2^26 tokens.
	EvictionInterval time.Duration `json:"evictionInterval"`
	MaxTreeSize      int           `json:"maxTreeSize"`
}

// DefaultPeerConfig returns the peers' own defaults.
func DefaultPeerConfig() PeerConfig {
	return PeerConfig{
		Dynamo: DynamoConfig{
			OverlapScoreCredit: 1, HostCacheHitWeight: 0.75, DiskCacheHitWeight: 0.25,
			PrefillLoadScale: 1, PredictedTTL: 5 * time.Second,
		},
		SGLang: SGLangConfig{
			CacheThreshold: 0.3, BalanceAbsThreshold: 64, BalanceRelThreshold: 1.5,
			EvictionInterval: 60 * time.Second, MaxTreeSize: 1 << 26,
		},
	}
}

func (p PeerConfig) validate() error {
	d, s := p.Dynamo, p.SGLang
	for _, v := range []float64{d.OverlapScoreCredit, d.HostCacheHitWeight, d.DiskCacheHitWeight, d.PrefillLoadScale,
		d.OverlapCreditDecay, d.Temperature, s.CacheThreshold, s.BalanceRelThreshold} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return errors.New("peer weights and thresholds must be finite and >= 0")
		}
	}
	if d.PredictedTTL < 0 || s.EvictionInterval < 0 || s.BalanceAbsThreshold < 0 || s.MaxTreeSize < 1 {
		return errors.New("peers: predictedTTL, evictionInterval and balanceAbsThreshold must be >= 0, maxTreeSize >= 1")
	}
	return nil
}
