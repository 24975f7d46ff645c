package lora

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/telemetry"
)

// Source gives an endpoint's last scraped signal (its waiting queue and
// LoRA adapter state) and whether it is fresh. *enginemetrics.Scraper is
// one; it must be safe for concurrent use and should not allocate, since
// the scorer calls it for every candidate of every request that names an
// adapter.
type Source interface {
	Signal(ep kvroute.Endpoint) (enginemetrics.Signal, bool)
}

// Options are a Scorer's injected dependencies.
type Options struct {
	// Set carries the registerer of the Scorer's metric (nil registers
	// nothing); its logger and clock are not used.
	telemetry.Set
}

// Scorer is the adapter-affinity scorer, a kvroute.Scorer: for a request
// naming a LoRA adapter (kvroute.Request.LoRA) it rates each candidate by
// what its engine last reported about that adapter — ScoreRunning when its
// running batch uses it, ScoreWaiting when requests of it wait there,
// ScoreLoad when the engine would have to load it (less Config.CapPenalty
// when its max_lora slots are full), when it runs or queues the adapter but
// at least Config.MaxWaiting requests wait there (saturated), and when the
// state is unknown — plus, for the ScoreLoad cases, a rendezvous-hash
// spread below HashSpread. A request without an adapter scores 0 on every
// candidate at the cost of one comparison. Its methods are safe for
// concurrent use.
type Scorer struct {
	cfg   Config
	src   Source
	set   telemetry.Set
	vec   *prometheus.CounterVec
	state [numStates]prometheus.Counter
}

// Candidate states counted in kvroute_lora_candidates_total{state}.
const (
	stRunning = iota
	stWaiting
	stLoad
	stLoadAtCap
	stUnknown
	stSaturated
	numStates
)

var stateNames = [numStates]string{"running", "waiting", "load", "load_at_cap", "unknown", "saturated"}

// New returns a Scorer reading adapter state from src.
func New(cfg Config, src Source, opts Options) (*Scorer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if src == nil {
		return nil, fmt.Errorf("lora: a Source of adapter state is required")
	}
	s := &Scorer{cfg: cfg, src: src, set: opts.Set, vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_lora_candidates_total",
		Help: "Candidates the LoRA adapter-affinity scorer rated, by their engine's state for the request's adapter: " +
			"running, waiting, load (would load it into a free slot), load_at_cap (would load it with its max_lora slots full), " +
			"unknown (no fresh adapter metrics: scored neutral, as load), " +
			"saturated (runs or queues the adapter but its waiting queue reached maxWaiting: scored as load, so traffic spills).",
	}, []string{"state"})}
	for i, n := range stateNames {
		s.state[i] = s.vec.WithLabelValues(n)
	}
	if err := s.set.Register(s.vec); err != nil {
		return nil, fmt.Errorf("lora: registering metrics: %w", err)
	}
	return s, nil
}

// Weighted returns the Scorer with its Config.Weight, for
// kvroute.Options.Scorers.
func (s *Scorer) Weighted() kvroute.WeightedScorer {
	return kvroute.WeightedScorer{Scorer: s, Weight: s.cfg.Weight}
}

// Config returns the effective configuration (defaults applied).
func (s *Scorer) Config() Config { return s.cfg }

// Score rates candidate i of sel for the request's adapter (see Scorer).
func (s *Scorer) Score(sel *kvroute.Selection, i int) float64 {
	adapter := sel.Request().LoRA
	if adapter == "" {
		return 0
	}
	ep := sel.Candidate(i).Endpoint
	v, st := s.rate(adapter, ep)
	s.state[st].Inc()
	return v
}

// rate is Score's rule for one adapter and endpoint.
func (s *Scorer) rate(adapter string, ep kvroute.Endpoint) (float64, int) {
	sig, fresh := s.src.Signal(ep)
	info := &sig.LoRA
	spread := HashSpread * rendezvous(adapter, ep.ID)
	switch {
	case !fresh:
		return ScoreLoad + spread, stUnknown
	case s.cfg.MaxWaiting > 0 && sig.Waiting >= s.cfg.MaxWaiting && (info.IsRunning(adapter) || info.IsWaiting(adapter)):
		return ScoreLoad + spread, stSaturated
	case info.IsRunning(adapter):
		return ScoreRunning, stRunning
	case info.IsWaiting(adapter):
		return ScoreWaiting, stWaiting
	case info.AtCap():
		return ScoreLoad - s.cfg.CapPenalty + spread, stLoadAtCap
	default:
		return ScoreLoad + spread, stLoad
	}
}

// Close unregisters the Scorer's metric; it is idempotent.
func (s *Scorer) Close() { s.set.Unregister(s.vec) }

// rendezvous is the highest-random-weight hash of (adapter, endpoint) in
// [0, 1): FNV-1a over both strings with a separator, then a 64-bit mix.
// It is deterministic across processes, so every router replica ranks an
// adapter's endpoints alike, and it allocates nothing.
func rendezvous(adapter, id string) float64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(adapter); i++ {
		h = (h ^ uint64(adapter[i])) * prime
	}
	h = (h ^ 0xff) * prime
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * prime
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return float64(h>>11) / (1 << 53)
}
