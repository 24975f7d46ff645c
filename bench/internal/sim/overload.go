package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvroute/kvroute/admission"
)

// OverloadPolicy names one way of running the overload study: a routing
// policy and what decides when a request is dispatched.
type OverloadPolicy string

// The overload study's policies.
const (
	// OverloadAdmission is kvroute.Router behind the real admission
	// Controller (package admission): priority bands, round robin between
	// fairness IDs, queue deadlines, shedding, and its saturation decision
	// on the Router's own load tracker, then, between the pick and the send,
	// its per-endpoint dispatch gate (Controller.Hold).
	OverloadAdmission OverloadPolicy = "kvroute+admission"
	// OverloadKVRoute is kvroute.Router without admission: every request
	// is picked and dispatched when it arrives (kvroute's behaviour without
	// Options.Admission).
	OverloadKVRoute OverloadPolicy = "kvroute"
	// OverloadDynamo is Dynamo's KV router cost model behind its router
	// queue (overload_dynamo.go): held while every worker's active prefill
	// tokens exceed the queue threshold, released in strict-priority tiers,
	// first come first served within a tier.
	OverloadDynamo OverloadPolicy = "dynamo+queue"
	// OverloadSGLang and OverloadLMetric are the SGLang gateway's
	// cache_aware policy (fed by events) and LMetric, which have no router
	// queue: every request is dispatched when it arrives.
	OverloadSGLang  OverloadPolicy = "sglang-events"
	OverloadLMetric OverloadPolicy = "lmetric"
)

// AllOverloadPolicies lists the overload study's policies in report order.
var AllOverloadPolicies = []OverloadPolicy{OverloadAdmission, OverloadKVRoute, OverloadDynamo, OverloadSGLang, OverloadLMetric}

// routing returns the routing policy that places the study policy's
// requests.
func (p OverloadPolicy) routing(kv Policy) Policy {
	switch p {
	case OverloadDynamo:
		return Dynamo
	case OverloadSGLang:
		return SGLangEvents
	case OverloadLMetric:
		return LMetric
	}
	if kv != "" {
		return kv
	}
	return KVRoute
}

// ParseOverloadPolicy returns the OverloadPolicy named s.
func ParseOverloadPolicy(s string) (OverloadPolicy, error) {
	for _, p := range AllOverloadPolicies {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: unknown overload policy %q", ErrInvalidConfig, s)
}

// Traffic classes of the overload workload.
const (
	// ClassInteractive is the interactive class: priority 1, two tenants.
	ClassInteractive = "interactive"
	// ClassBatch is the batch class: priority -1 (sheddable).
	ClassBatch = "batch"
)

// The overload workload's fairness IDs: the interactive tenants and the
// batch class's one flow.
const (
	TenantA     = "tenant-a"
	TenantB     = "tenant-b"
	TenantBatch = "batch"
)

// OverloadWorkload is the overload study's traffic: an interactive class
// (priority 1) of two tenants sending TenantARatio : 1 of its requests, and
// a sheddable batch class (priority -1), each prompt a group's shared
// context followed by a question of its own, as in the shared-prefix
// workload. Each class and tenant has its own groups, so the classes
// compete for compute and cache, not for each other's prefixes.
type OverloadWorkload struct {
	// Requests is the run's length in requests of both classes.
	Requests int `json:"requests"`
	// InteractiveFraction is the share of requests that are interactive.
	InteractiveFraction float64 `json:"interactiveFraction"`
	// TenantARatio is tenant A's interactive traffic per unit of tenant B's.
	TenantARatio float64 `json:"tenantARatio"`
	// GroupsPerFlow is the number of shared contexts of each tenant and of
	// the batch class; UsersPerGroup the distinct questions per context.
	GroupsPerFlow int `json:"groupsPerFlow"`
	UsersPerGroup int `json:"usersPerGroup"`
	// ContextTokens and QuestionTokens are the prompt's two parts.
	ContextTokens  int `json:"contextTokens"`
	QuestionTokens int `json:"questionTokens"`
	// OutputTokens is every request's answer length.
	OutputTokens int `json:"outputTokens"`
}

// OverloadConfig is one overload run without its policy.
type OverloadConfig struct {
	// Base supplies the fleet, the event delay, the seed and the peers'
	// parameters; its Workload and Load are ignored.
	Base Config `json:"base"`
	// Workload is the traffic.
	Workload OverloadWorkload `json:"workload"`
	// Capacity is the fleet's capacity in requests per second on this
	// workload (MeasureCapacity); Load multiplies it into the offered rate.
	Capacity float64 `json:"capacity"`
	Load     float64 `json:"load"`
	// TTFTObjective is the interactive class's time-to-first-token
	// objective, from arrival at the gateway: goodput counts the
	// interactive requests that meet it.
	TTFTObjective time.Duration `json:"ttftObjective"`
	// Admission configures the kvroute+admission policy's Controller.
	Admission admission.Config `json:"admission"`
	// EngineSignals gives the admission the engines' own saturation
	// signals (waiting requests, KV-cache usage; engineScrape) beside
	// kvroute's own accounting, as the gateway's EngineMetrics does.
	EngineSignals bool `json:"engineSignals"`
	// EngineThresholds are the engine signals' saturation thresholds.
	EngineThresholds EngineThresholds `json:"engineThresholds"`
	// Gate runs the admission's per-endpoint dispatch gate
	// (Controller.Hold) between each pick and its send, on the engine
	// signals (EngineSignals).
	Gate bool `json:"gate"`
	// DynamoQueue configures the dynamo+queue policy's router queue.
	DynamoQueue DynamoQueueConfig `json:"dynamoQueue"`
	// KVRoute is the routing policy of the kvroute and kvroute+admission
	// rows: "" means KVRoute, kvroute's default; a kvroute experiment
	// policy (ExperimentPolicies, e.g. KVRouteCrowding) studies that
	// configuration under overload. The capacity is measured with it too.
	KVRoute Policy `json:"kvroute,omitempty"`
}

// DefaultOverloadWorkload is 4,000 requests, 30 % interactive (tenant A 3 :
// 1 tenant B), 8 contexts of 2,048 tokens per flow with 16 questions of 384
// tokens each, 256-token answers. At 2× capacity the interactive class alone
// offers 0.6× capacity: admission can keep it served; what it cannot serve
// is the batch class.
func DefaultOverloadWorkload() OverloadWorkload {
	return OverloadWorkload{
		Requests: 4000, InteractiveFraction: 0.3, TenantARatio: 3,
		GroupsPerFlow: 8, UsersPerGroup: 16, ContextTokens: 2048, QuestionTokens: 384, OutputTokens: 256,
	}
}

// DefaultOverloadConfig returns the overload study's defaults at load: the
// default fleet, one gateway replica (the admission's queue and its
// saturation view are per replica; one replica keeps every policy's view
// whole), a 1 s interactive TTFT objective, the admission set up as
// DefaultOverloadAdmission and Dynamo's queue at its documented defaults.
// Capacity is 0 until MeasureCapacity fills it.
func DefaultOverloadConfig(load float64) OverloadConfig {
	base := DefaultConfig(SharedPrefix, 1)
	base.GatewayReplicas = 1
	return OverloadConfig{
		Base: base, Workload: DefaultOverloadWorkload(), Load: load,
		TTFTObjective: time.Second, Admission: DefaultOverloadAdmission(base.Fleet), EngineSignals: true, Gate: true, EngineThresholds: DefaultEngineThresholds(), DynamoQueue: DefaultDynamoQueue(),
	}
}

// validate checks the overload settings and returns the base Config a run
// uses (its workload standing in for the prompt-size checks).
func (c OverloadConfig) validate() (Config, error) {
	w := c.Workload
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: overload: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case w.Requests < 1 || w.GroupsPerFlow < 1 || w.UsersPerGroup < 1 || w.ContextTokens < 1 || w.QuestionTokens < 1 || w.OutputTokens < 1:
		return Config{}, bad("workload sizes must be positive: %+v", w)
	case !(w.InteractiveFraction >= 0 && w.InteractiveFraction <= 1):
		return Config{}, bad("interactiveFraction %v not in [0, 1]", w.InteractiveFraction)
	case !(w.TenantARatio > 0):
		return Config{}, bad("tenantARatio %v must be positive", w.TenantARatio)
	case !(c.Capacity > 0) || !(c.Load > 0):
		return Config{}, bad("capacity %v and load %v must be positive", c.Capacity, c.Load)
	case c.TTFTObjective <= 0:
		return Config{}, bad("ttftObjective %v must be positive", c.TTFTObjective)
	case c.KVRoute != "" && !c.KVRoute.isKVRoute():
		return Config{}, bad("kvroute policy %q is not a configuration of kvroute", c.KVRoute)
	}
	cfg := c.Base
	cfg.Workload = Workload{Kind: SharedPrefix, Requests: w.Requests, OutputTokens: w.OutputTokens,
		Groups: w.GroupsPerFlow, Users: w.UsersPerGroup, ContextTokens: w.ContextTokens, QuestionTokens: w.QuestionTokens}
	cfg.Load = c.Load
	cfg.GatewayReplicas = 1
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// overloadArrival is one request of the overload workload.
type overloadArrival struct {
	at     time.Time
	prompt []uint32
	class  string
	tenant string // fairness ID
}

// overloadTrace draws the run's arrivals from the seed: Poisson arrivals at
// Load × Capacity, each request's class and tenant, and its prompt. Every
// policy sees the same trace.
func overloadTrace(c OverloadConfig, start time.Time) []overloadArrival {
	w := c.Workload
	seed := c.Base.Seed
	content := rand.New(rand.NewPCG(seed, 0x0c))
	times := rand.New(rand.NewPCG(seed, 0x0a))
	pick := rand.New(rand.NewPCG(seed, 0x0b))
	flows := []string{TenantA, TenantB, TenantBatch}
	contexts := make(map[string][][]uint32, len(flows))
	questions := make(map[string][][]uint32, len(flows))
	for _, f := range flows {
		for range w.GroupsPerFlow {
			contexts[f] = append(contexts[f], randTokens(content, w.ContextTokens))
		}
		for range w.GroupsPerFlow * w.UsersPerGroup {
			questions[f] = append(questions[f], randTokens(content, w.QuestionTokens))
		}
	}
	rate := c.Load * c.Capacity
	pA := w.TenantARatio / (w.TenantARatio + 1)
	out := make([]overloadArrival, 0, w.Requests)
	at := start
	for range w.Requests {
		at = at.Add(time.Duration(times.ExpFloat64() / rate * float64(time.Second)))
		a := overloadArrival{at: at, class: ClassBatch, tenant: TenantBatch}
		if pick.Float64() < w.InteractiveFraction {
			a.class, a.tenant = ClassInteractive, TenantB
			if pick.Float64() < pA {
				a.tenant = TenantA
			}
		}
		g, u := pick.IntN(w.GroupsPerFlow), pick.IntN(w.UsersPerGroup)
		p := make([]uint32, 0, w.ContextTokens+w.QuestionTokens)
		a.prompt = append(append(p, contexts[a.tenant][g]...), questions[a.tenant][g*w.UsersPerGroup+u]...)
		out = append(out, a)
	}
	return out
}
