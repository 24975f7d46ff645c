package sim

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kvroute/kvroute/simengine"
)

// Policy names a routing policy the simulation compares.
type Policy string

// The simulated policies.
const (
	// KVRoute is the real kvroute.Router (precise prefix-cache routing),
	// its index fed by the engines' KV events through kvevents.
	KVRoute Policy = "kvroute"
	// KVRoutePrefillOnly is kvroute.Router with OpenRequestTokens = 0, the
	// default before open requests counted as load: its load score sees
	// only committed prefill tokens. The report shows it as the "before".
	KVRoutePrefillOnly Policy = "kvroute-prefill-only"
	// Approximate is a cache-blind prefix router: it learns only from its
	// own decisions (with a TTL) and weighs that guess against queue depth,
	// like llm-d's approximate prefix-cache profile.
	Approximate Policy = "approximate"
	// LeastLoad sends each request to the endpoint with the fewest
	// committed in-flight prompt tokens.
	LeastLoad Policy = "least-load"
	// RoundRobin cycles through the endpoints.
	RoundRobin Policy = "round-robin"
	// Dynamo is NVIDIA Dynamo's KV-router cost model: per worker, prefill
	// blocks in flight plus this prompt's, minus tier-weighted overlap
	// credits, plus active decode blocks; the lowest cost wins. Its index is
	// fed by the same engine events kvroute gets, plus a short-lived side
	// index of its own decisions.
	Dynamo Policy = "dynamo"
	// SGLang is the SGLang model gateway's cache_aware policy: least
	// in-flight requests when the pool is imbalanced, else the longest match
	// in its own approximate prefix tree above a match-ratio threshold, else
	// least in-flight requests again.
	SGLang Policy = "sglang"
	// SGLangEvents is SGLang's cache_aware policy on its event-driven path:
	// least in-flight requests when the pool is imbalanced, else the worker
	// holding the longest cached prefix per the engines' KV events, with no
	// match-ratio threshold (ties to the lower load, then the smaller
	// cache), else, when nobody holds any of it, the least-loaded worker.
	SGLangEvents Policy = "sglang-events"
	// LMetric is the LMetric policy (Dynamo's lmetric selection formula,
	// SGLang gateway's lmetric policy): the worker with the least
	// uncached prompt tokens × (its in-flight requests + 1), its overlap
	// from an index fed by the engines' events (lmetric.go).
	LMetric Policy = "lmetric"
	// KVRouteLMetric is the real kvroute.Router scoring its candidates the
	// LMetric way through its Scorer extension point, the affinity filter
	// off (kvlmetric.go). Not in AllPolicies: an experiment run on request
	// (-policies), not a default.
	KVRouteLMetric Policy = "kvroute-lmetric"
	// KVRouteCrowding is the real kvroute.Router with the affinity
	// filter's crowding rule at affinity.ChatCrowdingRatio without its
	// bound on the extra prefill (affinity.Config.CrowdingMaxExtraPrefill
	// 0): the rule as first written. Not in AllPolicies: run on request
	// (-policies).
	KVRouteCrowding Policy = "kvroute-crowding"
	// KVRouteNoCrowding is the real kvroute.Router with the crowding rule
	// off (affinity.Config.CrowdingRatio 0), kvroute's default before the
	// bounded rule became it. Not in AllPolicies: run on request
	// (-policies).
	KVRouteNoCrowding Policy = "kvroute-no-crowding"
	// KVRouteBounded is the real kvroute.Router whose crowding rule keeps
	// its bound on the extra prefill however severe the crowding
	// (affinity.Config.CrowdingUnboundRatio 0), kvroute's default before
	// the bound was lifted on severe crowding. Not in AllPolicies: run on
	// request (-policies).
	KVRouteBounded Policy = "kvroute-bounded"
)

// AllPolicies lists every routing policy in report order.
var AllPolicies = []Policy{KVRoute, Dynamo, SGLang, SGLangEvents, LMetric, KVRoutePrefillOnly, Approximate, LeastLoad, RoundRobin}

// ExperimentPolicies are the policies -policies accepts beyond
// AllPolicies: variants of kvroute's configuration studied on request.
var ExperimentPolicies = []Policy{KVRouteLMetric, KVRouteCrowding, KVRouteNoCrowding, KVRouteBounded}

// PeerPolicies are the other systems' own routing policies, which the
// report's targets compare kvroute against.
var PeerPolicies = []Policy{Dynamo, SGLang, SGLangEvents, LMetric}

// eventFed reports whether the policy's index is fed by the engines' KV
// events.
func (p Policy) eventFed() bool {
	return p.isKVRoute() || p == Dynamo || p == SGLangEvents || p == LMetric || p.isSessionPolicy()
}

// isKVRoute reports whether the policy is the real kvroute.Router in one of
// its configurations.
func (p Policy) isKVRoute() bool {
	return p == KVRoute || p == KVRoutePrefillOnly || p == KVRouteLMetric || p == KVRouteCrowding || p == KVRouteNoCrowding || p == KVRouteBounded
}

// ParsePolicy returns the Policy named s.
func ParsePolicy(s string) (Policy, error) {
	for _, p := range append(AllPolicies[:len(AllPolicies):len(AllPolicies)], ExperimentPolicies...) {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: unknown policy %q", ErrInvalidConfig, s)
}

// WorkloadKind names a traffic shape.
type WorkloadKind string

// The simulated workloads.
const (
	// SharedPrefix is G groups × U users: every request is one group's long
	// shared context followed by one of that group's user questions.
	SharedPrefix WorkloadKind = "shared-prefix"
	// MultiTurn is chat sessions: each turn resends the conversation so far
	// (system prompt, earlier turns and answers) plus a new user message.
	MultiTurn WorkloadKind = "multi-turn"
	// NoReuse is the control: every prompt is unique.
	NoReuse WorkloadKind = "no-reuse"
	// ZipfDrift is shared-prefix traffic whose groups are drawn from a Zipf
	// distribution over a popularity ranking that is reshuffled at every
	// phase boundary: a few hot groups at a time, and the hot set moves.
	ZipfDrift WorkloadKind = "zipf-drift"
	// Heterogeneous is shared-prefix traffic on a fleet with two engine
	// speeds: some engines run every step more slowly.
	Heterogeneous WorkloadKind = "heterogeneous"
	// Trace replays a Mooncake trace window (Workload.Trace): arrivals at
	// its timestamps scaled to the load, prompts derived from its hash
	// IDs, its output lengths. Not in AllWorkloads: it needs a trace file.
	Trace WorkloadKind = "trace"
)

// AllWorkloads lists every workload in report order.
var AllWorkloads = []WorkloadKind{SharedPrefix, MultiTurn, NoReuse, ZipfDrift, Heterogeneous}

// sharedShape reports whether the workload's prompts are a group context
// plus a user question.
func (k WorkloadKind) sharedShape() bool {
	return k == SharedPrefix || k == ZipfDrift || k == Heterogeneous
}

// ErrInvalidConfig is wrapped by every configuration error of the simulation.
var ErrInvalidConfig = errors.New("sim: invalid config")

// Fleet describes the simulated engines (all identical).
type Fleet struct {
	// Engines is the number of engine instances (endpoints).
	Engines int `json:"engines"`
	// BlockSize is the KV block size in tokens, shared by the engines and
	// the router.
	BlockSize int `json:"blockSize"`
	// NumGPUBlocks is each engine's KV-cache capacity in blocks.
	NumGPUBlocks int `json:"numGPUBlocks"`
	// MaxNumBatchedTokens is each engine's per-step token budget (chunked
	// prefill).
	MaxNumBatchedTokens int `json:"maxNumBatchedTokens"`
	// MaxNumSeqs caps each engine's running requests.
	MaxNumSeqs int `json:"maxNumSeqs"`
	// PrefillTokensPerSecond is each engine's compute speed.
	PrefillTokensPerSecond float64 `json:"prefillTokensPerSecond"`
	// DecodeStep is the fixed cost of one engine step.
	DecodeStep time.Duration `json:"decodeStep"`
	// Hybrid, when set, makes every engine a hybrid-attention model
	// (simengine.HybridConfig; hybrid.go).
	Hybrid *simengine.HybridConfig `json:"hybrid,omitempty"`
}

// DefaultFleet is 8 engines with the engine model's defaults (64-token
// blocks, 8,192-token steps, 10,000 prefill tokens/s, 10 ms per step)
// except a 1,024-block (65,536-token) KV cache each, so that no engine can
// hold a default workload's shared data alone and the whole fleet only
// about as much as it.
func DefaultFleet() Fleet {
	return Fleet{
		Engines:                8,
		BlockSize:              64,
		NumGPUBlocks:           1024,
		MaxNumBatchedTokens:    8192,
		MaxNumSeqs:             256,
		PrefillTokensPerSecond: 10_000,
		DecodeStep:             10 * time.Millisecond,
	}
}

// Workload describes the traffic. Fields that do not apply to Kind are
// ignored.
type Workload struct {
	Kind WorkloadKind `json:"kind"`
	// Requests is the number of requests of the run (for MultiTurn,
	// sessions × Turns, rounded down to whole sessions).
	Requests int `json:"requests"`
	// OutputTokens is every request's max_tokens (the engine model always
	// generates exactly that many).
	OutputTokens int `json:"outputTokens"`

	// SharedPrefix: Groups × Users distinct prompts, ContextTokens of shared
	// group context followed by QuestionTokens of the user's question.
	Groups         int `json:"groups,omitempty"`
	Users          int `json:"users,omitempty"`
	ContextTokens  int `json:"contextTokens,omitempty"`
	QuestionTokens int `json:"questionTokens,omitempty"`

	// MultiTurn: sessions of Turns turns; session s starts with system
	// prompt s mod SystemPrompts (SystemTokens long); every turn adds
	// UserTokens of user message; the next turn comes ThinkTime (mean of an
	// exponential) after the previous answer ended.
	SystemPrompts int           `json:"systemPrompts,omitempty"`
	SystemTokens  int           `json:"systemTokens,omitempty"`
	UserTokens    int           `json:"userTokens,omitempty"`
	Turns         int           `json:"turns,omitempty"`
	ThinkTime     time.Duration `json:"thinkTime,omitempty"`

	// NoReuse: every prompt is PromptTokens of fresh tokens.
	PromptTokens int `json:"promptTokens,omitempty"`

	// ZipfDrift: group ranks are drawn with probability ∝ 1/rank^ZipfS, and
	// the rank → group assignment is reshuffled Phases times over the run
	// (Phases equal slices of the requests).
	ZipfS  float64 `json:"zipfS,omitempty"`
	Phases int     `json:"phases,omitempty"`

	// Heterogeneous: the first SlowFraction of the fleet's engines (rounded
	// to the nearest engine) run every step SlowFactor times longer (prefill
	// and decode alike).
	SlowFraction float64 `json:"slowFraction,omitempty"`
	SlowFactor   float64 `json:"slowFactor,omitempty"`

	// Trace: the decoded trace window (TraceWorkload); Requests is its
	// length and OutputTokens its mean output (each request generates its
	// own output_length).
	Trace *TraceData `json:"trace,omitempty"`
}

// slowEngines is how many of a fleet of n engines are slow.
func (w Workload) slowEngines(n int) int {
	if w.Kind != Heterogeneous {
		return 0
	}
	return min(int(math.Round(w.SlowFraction*float64(n))), n)
}

// speed returns engine i's relative speed in a fleet of n (1 = the fleet's
// nominal speed).
func (w Workload) speed(i, n int) float64 {
	if i < w.slowEngines(n) && w.SlowFactor > 0 {
		return 1 / w.SlowFactor
	}
	return 1
}

// DefaultWorkload returns the default shape of kind. Shared-prefix keeps
// the published benchmark's counts (150 groups × 5 users) and divides its
// lengths by three (a 6,000-token context, 1,200-token questions and
// 1,000-token answers become 2,048, 384 and 333 tokens), so that a run of
// 2,000 requests takes about a second of host time while the working set
// (≈9,300 blocks) still exceeds the default fleet's 8,192 cache blocks.
// Multi-turn: 8-turn sessions over 4 shared system prompts of 1,024 tokens,
// 128-token user messages, 333-token answers, 3 s mean think time.
// No-reuse: unique 2,048-token prompts, 333-token answers.
// Zipf-drift: the shared-prefix shape with groups drawn Zipf(s = 1.1) over a
// ranking reshuffled at a third and two thirds of the run. Heterogeneous:
// the shared-prefix shape on a fleet whose first half of engines are 2×
// slower.
func DefaultWorkload(kind WorkloadKind) Workload {
	w := Workload{Kind: kind, Requests: 2000, OutputTokens: 333}
	switch kind {
	case SharedPrefix, ZipfDrift, Heterogeneous:
		w.Groups, w.Users, w.ContextTokens, w.QuestionTokens = 150, 5, 2048, 384
	case MultiTurn:
		w.SystemPrompts, w.SystemTokens, w.UserTokens, w.Turns, w.ThinkTime = 4, 1024, 128, 8, 3*time.Second
	case NoReuse:
		w.PromptTokens = 2048
	}
	switch kind {
	case ZipfDrift:
		w.ZipfS, w.Phases = 1.1, 3
	case Heterogeneous:
		w.SlowFraction, w.SlowFactor = 0.5, 2
	}
	return w
}

// MeanPromptTokens is the workload's mean prompt length, used to turn a load
// fraction into a request rate.
func (w Workload) MeanPromptTokens() float64 {
	switch {
	case w.Kind.sharedShape():
		return float64(w.ContextTokens + w.QuestionTokens)
	case w.Kind == Trace && w.Trace != nil:
		return w.Trace.Stats().MeanInput
	case w.Kind == MultiTurn:
		// Turn k (0-based) sends system + (k+1) user messages + k answers.
		sum := 0.0
		for k := 0; k < w.Turns; k++ {
			sum += float64(w.SystemTokens + (k+1)*w.UserTokens + k*w.OutputTokens)
		}
		return sum / float64(max(w.Turns, 1))
	}
	return float64(w.PromptTokens)
}

// Config is one simulation run: a fleet, a workload, an offered load and a
// policy-independent seed.
type Config struct {
	// Seed makes the run reproducible: the same Config gives the same
	// result, and every policy sees the same prompts and arrival process.
	Seed uint64 `json:"seed"`
	// Fleet is the engines.
	Fleet Fleet `json:"fleet"`
	// Workload is the traffic.
	Workload Workload `json:"workload"`
	// Load is the offered request rate as a fraction of the fleet's prefill
	// capacity: Engines × PrefillTokensPerSecond / MeanPromptTokens
	// requests per second with no cache hit at all.
	Load float64 `json:"load"`
	// GatewayReplicas is the number of gateway replicas, each running its
	// own instance of the policy; requests are spread over them at random,
	// as a Kubernetes Service spreads connections. Every kvroute replica
	// subscribes to every engine's events; an approximate or load-based
	// replica knows only its own decisions.
	GatewayReplicas int `json:"gatewayReplicas"`
	// EventDelay is how long after an engine step its KV events reach the
	// router's index (publish, network, decode and apply).
	EventDelay time.Duration `json:"eventDelay"`
	// ApproxTTL is how long the Approximate policy remembers that it sent a
	// prefix to an endpoint (it also forgets the least recently sent blocks
	// beyond Fleet.NumGPUBlocks per endpoint).
	ApproxTTL time.Duration `json:"approxTTL"`
	// ApproxPrefixWeight, ApproxQueueWeight and ApproxKVWeight weigh the
	// Approximate policy's prefix-match ratio, normalised waiting-queue
	// score and free-KV-cache score.
	ApproxPrefixWeight float64 `json:"approxPrefixWeight"`
	ApproxQueueWeight  float64 `json:"approxQueueWeight"`
	ApproxKVWeight     float64 `json:"approxKVWeight"`
	// ScrapeInterval is how often the Approximate policy refreshes the
	// engines' waiting-queue and KV-cache-usage metrics.
	ScrapeInterval time.Duration `json:"scrapeInterval"`
	// Peers holds the parameters of the peer systems' policies (Dynamo,
	// SGLang), their own defaults in DefaultConfig.
	Peers PeerConfig `json:"peers"`
	// RoundRobinReplicas spreads requests over the gateway replicas in
	// turn instead of at random (the replica sweep, replicas.go).
	RoundRobinReplicas bool `json:"roundRobinReplicas,omitempty"`
	// SharedState, when set, makes the kvroute replicas one pool sharing
	// in-flight load and decisions through package cluster on a virtual-time
	// store (sharedstate.go); nil: each replica accounts only its own load.
	SharedState *SharedState `json:"sharedState,omitempty"`
	// MaxVirtualTime aborts a run whose virtual clock passes it (a guard
	// against a model that never drains).
	MaxVirtualTime time.Duration `json:"maxVirtualTime"`
	// TieSeed varies only the routing policies' own random draws (each
	// replica's random source is seeded from Seed, the replica and
	// TieSeed): the same traffic, with the peers' and the baselines' equally
	// good endpoints chosen in a different order. kvroute breaks its ties by
	// hashing, so for it TieSeed changes only exploration and requests
	// without block keys. 0 is the standard run.
	TieSeed uint64 `json:"tieSeed,omitempty"`
	// IgnoreCacheGroups drops the engines' sliding-window and Mamba group
	// events before they reach the policies' indexes: kvroute before it
	// tracked those groups (hybrid.go), the "before" of the hybrid report.
	IgnoreCacheGroups bool `json:"ignoreCacheGroups,omitempty"`
	// LoadTieTolerance is kvroute.Config.LoadTieTolerance in every run of
	// a kvroute policy (kvrouter): picks decided by load tie within that
	// many of the best candidate's uncached tokens. 0 is kvroute's default.
	LoadTieTolerance float64 `json:"loadTieTolerance,omitempty"`
	// KVRoutePeerLoadFromMetrics gives every kvroute router an estimate of
	// the other gateway replicas' load on each engine, from the engines'
	// waiting and running requests scraped every ScrapeInterval
	// (enginemetrics.PeerLoads into the Router's tokenload.Tracker): an
	// experiment, off by default.
	KVRoutePeerLoadFromMetrics bool `json:"kvroutePeerLoadFromMetrics,omitempty"`
}

// DefaultConfig returns the default fleet with the default workload of kind
// at the given load: seed 1, two active-active gateway replicas (as llm-d's
// precise prefix-cache routing guide runs its routers), a 5 ms event delay,
// and an approximate router with a 120 s TTL, weights 3 (prefix), 2 (queue)
// and 2 (KV usage) and a 50 ms metrics scrape.
func DefaultConfig(kind WorkloadKind, load float64) Config {
	return Config{
		Seed:               1,
		Fleet:              DefaultFleet(),
		Workload:           DefaultWorkload(kind),
		Load:               load,
		GatewayReplicas:    2,
		EventDelay:         5 * time.Millisecond,
		ApproxTTL:          120 * time.Second,
		ApproxPrefixWeight: 3,
		ApproxQueueWeight:  2,
		ApproxKVWeight:     2,
		ScrapeInterval:     50 * time.Millisecond,
		Peers:              DefaultPeerConfig(),
		MaxVirtualTime:     24 * time.Hour,
	}
}

// Capacity is the fleet's prefill capacity in requests per second for the
// workload, with no cache hit (slow engines count at their speed).
func (c Config) Capacity() float64 {
	speeds := 0.0
	for i := 0; i < c.Fleet.Engines; i++ {
		speeds += c.Workload.speed(i, c.Fleet.Engines)
	}
	return speeds * c.Fleet.PrefillTokensPerSecond / c.Workload.MeanPromptTokens()
}

// CacheBlocks is the fleet's total KV cache in blocks, the size of the
// capacity bound's pooled cache.
func (c Config) CacheBlocks() int { return c.Fleet.Engines * c.Fleet.NumGPUBlocks }

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	f, w := c.Fleet, c.Workload
	switch {
	case f.Engines < 1 || f.Engines > 4096:
		return bad("fleet.engines %d not in [1, 4096]", f.Engines)
	case f.BlockSize < 1 || f.NumGPUBlocks < 1 || f.MaxNumBatchedTokens < 1 || f.MaxNumSeqs < 1:
		return bad("fleet sizes must be positive: %+v", f)
	case !(f.PrefillTokensPerSecond > 0) || math.IsInf(f.PrefillTokensPerSecond, 0):
		return bad("fleet.prefillTokensPerSecond %v must be a positive number", f.PrefillTokensPerSecond)
	case f.DecodeStep < 0:
		return bad("fleet.decodeStep %v is negative", f.DecodeStep)
	case !(c.Load > 0) || math.IsInf(c.Load, 0):
		return bad("load %v must be a positive number", c.Load)
	case c.GatewayReplicas < 1 || c.GatewayReplicas > 64:
		return bad("gatewayReplicas %d not in [1, 64]", c.GatewayReplicas)
	case c.EventDelay < 0 || c.ApproxTTL <= 0:
		return bad("eventDelay must be >= 0 and approxTTL > 0 (got %v, %v)", c.EventDelay, c.ApproxTTL)
	case c.ApproxPrefixWeight < 0 || c.ApproxQueueWeight < 0 || c.ApproxKVWeight < 0 || c.ScrapeInterval < 0:
		return bad("approximate weights must be >= 0")
	case c.MaxVirtualTime <= 0:
		return bad("maxVirtualTime %v must be positive", c.MaxVirtualTime)
	case w.Requests < 1 || w.OutputTokens < 1:
		return bad("workload.requests and workload.outputTokens must be positive")
	}
	switch w.Kind {
	case SharedPrefix, ZipfDrift, Heterogeneous:
		if w.Groups < 1 || w.Users < 1 || w.ContextTokens < 1 || w.QuestionTokens < 1 {
			return bad("shared-prefix needs groups, users, contextTokens and questionTokens >= 1")
		}
	case MultiTurn:
		if w.SystemPrompts < 1 || w.SystemTokens < 1 || w.UserTokens < 1 || w.Turns < 1 || w.ThinkTime < 0 {
			return bad("multi-turn needs systemPrompts, systemTokens, userTokens, turns >= 1 and thinkTime >= 0")
		}
		if w.Requests < w.Turns {
			return bad("multi-turn needs at least one session: requests %d < turns %d", w.Requests, w.Turns)
		}
	case NoReuse:
		if w.PromptTokens < 1 {
			return bad("no-reuse needs promptTokens >= 1")
		}
	case Trace:
		if err := c.validateTrace(); err != nil {
			return err
		}
		if err := c.Peers.validate(); err != nil {
			return bad("%v", err)
		}
		return nil // its requests' lengths were checked against the engines
	default:
		return bad("unknown workload kind %q", w.Kind)
	}
	switch w.Kind {
	case ZipfDrift:
		if !(w.ZipfS >= 0) || math.IsInf(w.ZipfS, 0) || w.Phases < 1 || w.Phases > w.Requests {
			return bad("zipf-drift needs a finite zipfS >= 0 and phases in [1, requests]")
		}
	case Heterogeneous:
		if !(w.SlowFraction >= 0 && w.SlowFraction <= 1) || !(w.SlowFactor >= 1) || math.IsInf(w.SlowFactor, 0) {
			return bad("heterogeneous needs slowFraction in [0, 1] and a finite slowFactor >= 1")
		}
	}
	if err := c.Peers.validate(); err != nil {
		return bad("%v", err)
	}
	// The longest prompt plus its output must fit one engine's KV cache.
	longest := int(w.MeanPromptTokens())
	if w.Kind == MultiTurn {
		longest = w.SystemTokens + w.Turns*(w.UserTokens+w.OutputTokens)
	}
	if blocks := (longest + w.OutputTokens + f.BlockSize - 1) / f.BlockSize; blocks > f.NumGPUBlocks {
		return bad("a %d-token request needs %d blocks, more than an engine's %d", longest+w.OutputTokens, blocks, f.NumGPUBlocks)
	}
	return nil
}
