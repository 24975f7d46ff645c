package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/telemetry"
)

// LoRAConfig is the LoRA adapter-affinity study: Adapters adapters over
// Engines simulated engines with MaxLoRAs slots each (simengine's LoRA
// model: a batch uses at most MaxLoRAs adapters, a request whose adapter
// finds no slot waits, a load stalls the engine's step by LoadTime and
// evicts the least recently used adapter), Poisson arrivals at Rate
// requests per second, each request's adapter drawn uniformly or with a
// Zipf skew, every prompt distinct (no prefix reuse, so only adapters and
// load decide).
type LoRAConfig struct {
	Engines, Adapters, MaxLoRAs int
	// MaxNumSeqs is each engine's --max-num-seqs (0: simengine's default).
	MaxNumSeqs                 int
	LoadTime                   time.Duration
	Requests                   int
	Rate                       float64 // requests per second, the whole fleet
	PromptTokens, OutputTokens int
	// Zipf, when above 1, draws adapters with that Zipf exponent; 0 draws
	// them uniformly.
	Zipf float64
	// ScrapeInterval is how often the scorer's view of each engine's
	// vllm:lora_requests_info is refreshed (virtual time).
	ScrapeInterval time.Duration
	Seed           uint64
}

// DefaultLoRAConfig is the setting: 8 adapters over 4 engines
// capped at 2, at rate requests per second.
func DefaultLoRAConfig(rate float64) LoRAConfig {
	return LoRAConfig{Engines: 4, Adapters: 8, MaxLoRAs: 2, MaxNumSeqs: 64, LoadTime: simengine.DefaultLoRALoadTime, Requests: 4000,
		Rate: rate, PromptTokens: 512, OutputTokens: 64, ScrapeInterval: 50 * time.Millisecond, Seed: 1}
}

// LoRA study policies.
const (
	// LoRAPolicyLoad is kvroute without the adapter scorer: token load only.
	LoRAPolicyLoad = "kvroute"
	// LoRAPolicyScorer is kvroute with lora.Scorer at its defaults.
	LoRAPolicyScorer = "kvroute+lora"
	// LoRAPolicyRendezvous sends each adapter to its highest-random-weight
	// engine only, Dynamo's rendezvous placement with a replica factor of
	// 1, whatever the load.
	LoRAPolicyRendezvous = "rendezvous"
)

// LoRAPolicies lists the LoRA study's policies.
var LoRAPolicies = []string{LoRAPolicyLoad, LoRAPolicyScorer, LoRAPolicyRendezvous}

// LoRAResult is one LoRA study run.
type LoRAResult struct {
	Policy           string
	Requests         int
	Loads, Evictions uint64
	LoadsPer1k       float64
	TTFTMean         time.Duration
	TTFTP50, TTFTP90 time.Duration
	TTFTP99          time.Duration
}

// loraView is the scorer's Source in the study: each engine's adapter
// state as its vllm:lora_requests_info read at the last scrape tick,
// chosen by enginemetrics' rule (the newest series naming an adapter).
type loraView struct {
	ids   map[string]int
	state []enginemetrics.Signal
}

func (v *loraView) Signal(ep kvroute.Endpoint) (enginemetrics.Signal, bool) {
	i, ok := v.ids[ep.ID]
	if !ok {
		return enginemetrics.Signal{}, false
	}
	return v.state[i], true
}

func (v *loraView) scrape(engines []*simengine.Engine) {
	for i, e := range engines {
		var best *simengine.LoRASeries
		series := e.LoRASeries()
		for j := range series {
			s := &series[j]
			named := s.Running != "" || s.Waiting != ""
			bestNamed := best != nil && (best.Running != "" || best.Waiting != "")
			if best == nil || (named && !bestNamed) || (named == bestNamed && s.Value > best.Value) {
				best = s
			}
		}
		info := enginemetrics.LoRAInfo{Reported: true}
		if best != nil {
			info.Running, info.Waiting = splitNames(best.Running), splitNames(best.Waiting)
			info.MaxLoRA, _ = strconv.Atoi(best.MaxLoRA)
			info.Timestamp = best.Value
		}
		st := e.Stats()
		v.state[i] = enginemetrics.Signal{LoRA: info, Waiting: st.Waiting, Running: st.Running}
	}
}

func splitNames(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// RunLoRA runs the study once with one policy.
func RunLoRA(cfg LoRAConfig, policy string) (LoRAResult, error) {
	if cfg.Engines < 1 || cfg.Adapters < 1 || cfg.Requests < 1 || !(cfg.Rate > 0) || cfg.ScrapeInterval <= 0 {
		return LoRAResult{}, errors.New("sim: lora: engines, adapters, requests, rate and scrape interval must be positive")
	}
	if math.IsInf(cfg.Rate, 0) || math.IsInf(cfg.Zipf, 0) || math.IsNaN(cfg.Zipf) {
		// math/rand's Zipf draw never returns for an infinite exponent.
		return LoRAResult{}, fmt.Errorf("sim: lora: rate %v and zipf %v must be finite", cfg.Rate, cfg.Zipf)
	}
	start := simengine.DefaultStart
	now := start
	engines := make([]*simengine.Engine, cfg.Engines)
	for i := range engines {
		e, err := simengine.New(simengine.Config{Model: simModel, NumGPUBlocks: 4096, MaxNumSeqs: cfg.MaxNumSeqs,
			LoRA: &simengine.LoRAConfig{MaxLoRAs: cfg.MaxLoRAs, LoadTime: cfg.LoadTime}}, simengine.Options{})
		if err != nil {
			return LoRAResult{}, err
		}
		defer e.Close()
		engines[i] = e
	}
	ids := endpointIDs(cfg.Engines)
	eps := make([]kvroute.Endpoint, len(ids))
	view := &loraView{ids: map[string]int{}, state: make([]enginemetrics.Signal, len(ids))}
	for i, id := range ids {
		eps[i] = kvroute.Endpoint{ID: id}
		view.ids[id] = i
	}
	adapters := make([]string, cfg.Adapters)
	for i := range adapters {
		adapters[i] = fmt.Sprintf("adapter-%d", i)
	}

	var router *kvroute.Router
	if policy == LoRAPolicyLoad || policy == LoRAPolicyScorer {
		rc := kvroute.DefaultConfig()
		rc.Model = simModel
		rc.Events.Enabled = new(false)
		rc.DisableRender = true
		rc.Index.SweepInterval = -1
		opts := kvroute.Options{Set: telemetry.Set{Clock: virtualClock{now: func() time.Time { return now }}}}
		if policy == LoRAPolicyScorer {
			s, err := lora.New(lora.Config{}, view, lora.Options{})
			if err != nil {
				return LoRAResult{}, err
			}
			opts.Scorers = []kvroute.WeightedScorer{s.Weighted()}
		}
		r, err := kvroute.New(context.Background(), rc, opts)
		if err != nil {
			return LoRAResult{}, err
		}
		defer r.Close()
		router = r
	} else if policy != LoRAPolicyRendezvous {
		return LoRAResult{}, fmt.Errorf("sim: lora: unknown policy %q (want one of %v)", policy, LoRAPolicies)
	}

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x10ba))
	var zipf *rand.Zipf
	if cfg.Zipf > 1 {
		zipf = rand.NewZipf(rng, cfg.Zipf, 1, uint64(cfg.Adapters-1))
	}
	ttfts := make([]time.Duration, 0, cfg.Requests)
	nextArrival, arrived := start, 0
	nextScrape := start
	failed := error(nil)
	submit := func(n int) {
		a := adapters[rng.IntN(cfg.Adapters)]
		if zipf != nil {
			a = adapters[zipf.Uint64()]
		}
		prompt := make([]uint32, cfg.PromptTokens)
		for j := range prompt {
			prompt[j] = uint32(1000 + (n*7919+j*31)%30000)
		}
		i := rendezvousEngine(a, ids)
		var d *kvroute.Decision
		if router != nil {
			var err error
			d, err = router.Pick(context.Background(), &kvroute.Request{LoRA: a, Prompts: []render.Prompt{{TokenIDs: prompt}}}, eps)
			if err != nil {
				failed = err
				return
			}
			i = view.ids[d.Endpoint.ID]
		}
		engines[i].AdvanceTo(now)
		_, err := engines[i].Submit(simengine.Request{Prompt: prompt, MaxTokens: cfg.OutputTokens, LoRAName: a,
			OnToken: func(t simengine.TokenEvent) {
				if t.Index == 0 && d != nil {
					d.FirstChunk()
				}
			},
			OnDone: func(res simengine.Result) {
				if d != nil {
					d.Done(kvroute.DoneInfo{})
				}
				ttfts = append(ttfts, res.TTFT())
			}})
		if err != nil {
			failed = err
		}
	}
	for failed == nil {
		next, found := time.Time{}, false
		consider := func(t time.Time) {
			if !found || t.Before(next) {
				next, found = t, true
			}
		}
		for _, e := range engines {
			if t, ok := e.NextEventTime(); ok {
				consider(t)
			}
		}
		if arrived < cfg.Requests {
			consider(nextArrival)
			consider(nextScrape)
		}
		if !found {
			break
		}
		if next.Before(now) {
			next = now
		}
		now = next
		for _, e := range engines {
			if t, ok := e.NextEventTime(); ok && !t.After(now) {
				e.AdvanceTo(now)
			}
		}
		if !nextScrape.After(now) {
			view.scrape(engines)
			nextScrape = now.Add(cfg.ScrapeInterval)
		}
		for arrived < cfg.Requests && !nextArrival.After(now) {
			submit(arrived)
			arrived++
			nextArrival = nextArrival.Add(time.Duration(rng.ExpFloat64() / cfg.Rate * float64(time.Second)))
		}
	}
	if failed != nil {
		return LoRAResult{}, failed
	}
	res := LoRAResult{Policy: policy, Requests: len(ttfts)}
	for _, e := range engines {
		st := e.Stats()
		res.Loads += st.LoRALoads
		res.Evictions += st.LoRAEvictions
	}
	res.LoadsPer1k = float64(res.Loads) * 1000 / float64(max(res.Requests, 1))
	slices.Sort(ttfts)
	var sum time.Duration
	for _, t := range ttfts {
		sum += t
	}
	if n := len(ttfts); n > 0 {
		res.TTFTMean = sum / time.Duration(n)
		q := func(p float64) time.Duration { return ttfts[min(n-1, int(math.Ceil(p*float64(n)))-1)] }
		res.TTFTP50, res.TTFTP90, res.TTFTP99 = q(0.5), q(0.9), q(0.99)
	}
	return res, nil
}

// rendezvousEngine is the engine of ids with the highest random weight for
// adapter (FNV-1a of adapter and ID, mixed), Dynamo's placement rule.
func rendezvousEngine(adapter string, ids []string) int {
	best, bestH := 0, uint64(0)
	for i, id := range ids {
		h := uint64(14695981039346656037)
		for _, b := range []byte(adapter + "\xff" + id) {
			h = (h ^ uint64(b)) * 1099511628211
		}
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		if i == 0 || h > bestH {
			best, bestH = i, h
		}
	}
	return best
}
