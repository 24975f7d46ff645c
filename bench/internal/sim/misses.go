package sim

import (
	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/simengine"
)

// Misses decomposes the gap between a run's capacity bound and its hit
// rate, every term a fraction of the run's prompt tokens (hit-rate points),
// so that
//
//	HitRate = BoundHitRate − Residency − Replacement − Placement − Routing − InFlight
//
// and 1 − BoundHitRate = Compulsory + BeladyCapacity. The fleet's caches are
// observed exactly when each request arrives: every engine step's KV
// events are applied the moment the step ends to an index of their own,
// which no policy reads.
type Misses struct {
	// Compulsory is the share no policy can hit: first touches of a block
	// (1 − the infinite-cache ceiling).
	Compulsory float64 `json:"compulsory"`
	// BeladyCapacity is what even Belady's replacement over the pooled
	// cache misses for lack of capacity (infinite ceiling − bound).
	BeladyCapacity float64 `json:"beladyCapacity"`
	// Residency is what the blocks no request will ever hit, which the
	// engines' LRU must hold anyway, cost whatever the routing (bound −
	// the LRU-residency bound, Result.LRUBoundHitRate): proven, no routing
	// recovers it.
	Residency float64 `json:"residency"`
	// Replacement is the rest of what the engines' own cache policy loses
	// against Belady with the whole fleet's cache in one engine (the
	// LRU-residency bound − the one-engine reference): LRU evicts by
	// recency, not by next use, and hits only prefixes. It is measured,
	// not proven to be out of routing's reach: a routing that knew the
	// future could partition the stream over the engines' LRU caches
	// better than one cache does (bench/README.md). Zero until Sweep knows
	// the one-engine reference.
	Replacement float64 `json:"replacement"`
	// Placement is what the fleet's caches, as the policy filled them,
	// hold less than the one engine did: the one-engine reference − the
	// longest prefix of each prompt held by any engine at its arrival.
	// Prefixes duplicated on several engines and uneven cache pressure
	// across engines land here; negative when the split caches do better.
	Placement float64 `json:"placement"`
	// Routing is what a warmer endpoint held at arrival beyond the chosen
	// one: Σ (longest prefix on any engine − prefix on the chosen engine).
	Routing float64 `json:"routing"`
	// RoutingGate, RoutingBelowThreshold, RoutingUnknown and RoutingWarmer
	// split Routing for the kvroute policies by the affinity filter's
	// outcome: the TTFT gate fired; no endpoint was sticky and the warmest
	// held less than the affinity threshold of the prompt; no endpoint was
	// sticky in the router's index although one held enough (events or
	// speculative entries not there yet); any other outcome (the filter
	// kept a less warm endpoint too and it won on load).
	RoutingGate           float64 `json:"routingGate,omitempty"`
	RoutingBelowThreshold float64 `json:"routingBelowThreshold,omitempty"`
	RoutingUnknown        float64 `json:"routingUnknown,omitempty"`
	RoutingWarmer         float64 `json:"routingWarmer,omitempty"`
	// InFlight is what the chosen engine held at arrival but did not hit at
	// admission (evicted while the request queued, or lost to a
	// preemption); negative when requests in flight computed the prefix in
	// between.
	InFlight float64 `json:"inFlight"`
	// Anywhere and Chosen are the hit rates the fleet offered at arrival:
	// the longest prefix held by any engine, and the one on the engine the
	// policy chose.
	Anywhere float64 `json:"anywhere"`
	Chosen   float64 `json:"chosen"`
	// Duplication is the mean, over arrivals, of the fraction of the
	// fleet's cached blocks that are extra copies of a block another engine
	// also holds (1 − distinct blocks ÷ cached blocks).
	Duplication float64 `json:"duplication"`
	// EventsDropped counts engine events the observing index could not
	// apply; 0 means the observation was exact.
	EventsDropped int `json:"eventsDropped,omitempty"`
}

// split fills Residency, Replacement and Placement once the one-engine
// reference is known.
func (m *Misses) split(bound, lruBound, oneEngine float64) {
	m.Residency = bound - lruBound
	m.Replacement = lruBound - oneEngine
	m.Placement = oneEngine - m.Anywhere
}

// missAudit observes the fleet's caches for Misses.
type missAudit struct {
	ix      *kvindex.Index
	applier *kvevents.Applier
	ids     []string
	batch   wire.Batch
	match   kvindex.MatchResult
	keys    []kvindex.Key
	bs      int
	need    float64 // blocks ratio from which kvroute's filter is sticky

	anywhere, chosen     int64 // blocks, summed over requests
	gate, below, unknown int64
	warmer               int64
	dupSum               float64
	dupN                 int
	dropped              int // events the observing index could not apply (0 when the view is exact)
}

// auditNote is what the audit recorded for one request at its arrival.
type auditNote struct {
	best   int   // longest cached prefix on any engine, in countable blocks
	blocks []int // per engine
	limit  int   // countable blocks of the prompt
	total  int   // full blocks of the prompt
}

func newMissAudit(ids []string, blockSize int) (*missAudit, error) {
	ix, err := kvindex.New(kvindex.Config{BlockSize: blockSize, SweepInterval: -1}, kvindex.Options{})
	if err != nil {
		return nil, err
	}
	a, err := kvevents.NewApplier(kvevents.ApplierConfig{Model: simModel}, ix, kvevents.Options{})
	if err != nil {
		ix.Close()
		return nil, err
	}
	return &missAudit{ix: ix, applier: a, ids: ids, bs: blockSize, need: affinity.DefaultAffinityThreshold}, nil
}

// observe applies one engine step's events at once.
func (m *missAudit) observe(endpoint int, b simengine.EventBatch) {
	m.batch.Reset()
	for i := range b.Events {
		toWire(&m.batch, &b.Events[i])
	}
	res := m.applier.Apply(m.ids[endpoint], simModel, &m.batch)
	m.dropped += res.Dropped + res.Skipped
}

// arrive records what the fleet holds of prompt.
func (m *missAudit) arrive(prompt []uint32) auditNote {
	m.keys = keysOf(m.keys, prompt, m.bs)
	n := auditNote{limit: (len(prompt) - 1) / m.bs, total: len(m.keys), blocks: make([]int, len(m.ids))}
	if len(m.keys) > 0 {
		m.ix.Match(m.keys, m.ids, &m.match)
		for i := range m.match.Len() {
			b := min(m.match.Blocks(i), n.limit)
			n.blocks[i] = b
			n.best = max(n.best, b)
		}
	}
	if st := m.ix.Stats(); st.Memberships > 0 {
		m.dupSum += 1 - float64(st.Blocks)/float64(st.Memberships)
	}
	m.dupN++
	m.anywhere += int64(n.best)
	return n
}

// picked records the engine a request went to and, for kvroute, why.
func (m *missAudit) picked(n auditNote, engine int, d *routedBy) {
	c := n.blocks[engine]
	m.chosen += int64(c)
	lost := int64(n.best - c)
	if lost <= 0 || d == nil {
		return
	}
	switch {
	case d.outcome == affinity.OutcomeLoadOverride || d.outcome == affinity.OutcomeRequestLoadOverride:
		m.gate += lost
	case d.outcome == affinity.OutcomeNoMatch && float64(n.best) < m.need*float64(n.total):
		m.below += lost
	case d.outcome == affinity.OutcomeNoMatch:
		m.unknown += lost
	default:
		m.warmer += lost
	}
}

// routedBy is the kvroute decision detail the audit splits routing misses by.
type routedBy struct{ outcome affinity.Outcome }

// result returns the decomposition but its Replacement and Placement
// terms (Misses.split); queries is the run's prompt tokens and the rates are
// the run's hit rate, capacity bound and infinite-cache ceiling.
func (m *missAudit) result(queries int64, hit, bound, infinite float64) *Misses {
	if queries <= 0 {
		return &Misses{}
	}
	frac := func(blocks int64) float64 { return float64(blocks*int64(m.bs)) / float64(queries) }
	out := &Misses{
		Compulsory:            1 - infinite,
		BeladyCapacity:        infinite - bound,
		Anywhere:              frac(m.anywhere),
		Chosen:                frac(m.chosen),
		RoutingGate:           frac(m.gate),
		RoutingBelowThreshold: frac(m.below),
		RoutingUnknown:        frac(m.unknown),
		RoutingWarmer:         frac(m.warmer),
	}
	out.Routing = out.Anywhere - out.Chosen
	out.EventsDropped = m.dropped
	out.InFlight = out.Chosen - hit
	if m.dupN > 0 {
		out.Duplication = m.dupSum / float64(m.dupN)
	}
	return out
}

func (m *missAudit) close() { m.ix.Close() }

// OneEngine returns cfg with its fleet merged into one engine: the fleet's
// total KV cache, step budget, sequences and compute (slow engines counted
// at their speed), behind one gateway replica. Its hit rate under any
// policy is the one-engine reference of Result.OneEngineHitRate.
func OneEngine(cfg Config) Config {
	f, n := cfg.Fleet, cfg.Fleet.Engines
	speeds := 0.0
	for i := 0; i < n; i++ {
		speeds += cfg.Workload.speed(i, n)
	}
	f.Engines = 1
	f.NumGPUBlocks *= n
	f.MaxNumBatchedTokens *= n
	f.MaxNumSeqs *= n
	f.PrefillTokensPerSecond *= speeds
	cfg.Fleet = f
	cfg.Workload.SlowFraction = 0
	cfg.GatewayReplicas = 1
	return cfg
}
