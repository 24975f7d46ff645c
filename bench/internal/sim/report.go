package sim

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Meta describes a sweep for the report header.
type Meta struct {
	Command   string        // how the report was produced
	Generated time.Time     // when
	Wall      time.Duration // host time the sweep took
	Base      Config        // fleet and router settings (workload and load vary)
	Workloads []Workload
	Loads     []float64
	// SVG maps a workload kind to the chart file written next to the report.
	SVG map[WorkloadKind]string
	// Preamble, when set, is a paragraph written after the settings (a
	// trace run states its trace, window and working set there).
	Preamble string
}

// Target thresholds of the issue: on the shared-prefix workload kvroute's
// hit rate must reach BoundFraction of the capacity bound, and on every
// workload its TTFT p90 must be below every peer policy's at every load of
// at least HalfCapacity.
const (
	BoundFraction = 0.95
	HalfCapacity  = 0.5
)

// TargetRow is the target evaluation at one (workload, load).
type TargetRow struct {
	Workload     WorkloadKind
	Load         float64
	HitRate      float64 // kvroute
	Bound        float64 // the capacity bound on kvroute's trace
	OneEngine    float64 // the one-engine reference (a reference, not a bound; 0 when unknown)
	HitApplies   bool    // shared-prefix: the hit-rate target applies
	HitOK        bool    // HitRate ≥ BoundFraction × Bound
	TTFTP90      time.Duration
	BestPeer     time.Duration // the lowest TTFT p90 among the peer policies run
	BestPeerName Policy
	TTFTApplies  bool // load ≥ HalfCapacity and some peer policy ran
	TTFTOK       bool // kvroute's p90 is strictly below every peer policy's
	// BestOther and BestOtherName are the lowest TTFT p90 among all other
	// policies (peers and baselines).
	BestOther     time.Duration
	BestOtherName Policy
}

// Ratio is kvroute's hit rate as a fraction of the capacity bound.
func (t TargetRow) Ratio() float64 {
	if t.Bound <= 0 {
		return 0
	}
	return t.HitRate / t.Bound
}

// Targets evaluates the targets on every workload and load that
// has a kvroute result.
func Targets(results []Result) []TargetRow {
	var rows []TargetRow
	for _, kind := range kindsOf(results) {
		for _, l := range loadsOf(results, kind) {
			kv, ok := find(results, kind, l, KVRoute)
			if !ok {
				continue
			}
			row := TargetRow{Workload: kind, Load: l, HitRate: kv.HitRate, Bound: kv.BoundHitRate, OneEngine: kv.OneEngineHitRate, TTFTP90: kv.TTFTP90,
				HitApplies: kind == SharedPrefix, TTFTOK: true}
			row.HitOK = kv.HitRate >= BoundFraction*kv.BoundHitRate
			for _, r := range results {
				if r.Workload != kind || r.Load != l || r.Policy == KVRoute {
					continue
				}
				if row.BestOtherName == "" || r.TTFTP90 < row.BestOther {
					row.BestOther, row.BestOtherName = r.TTFTP90, r.Policy
				}
				if !slices.Contains(PeerPolicies, r.Policy) {
					continue
				}
				if row.BestPeerName == "" || r.TTFTP90 < row.BestPeer {
					row.BestPeer, row.BestPeerName = r.TTFTP90, r.Policy
				}
				if kv.TTFTP90 >= r.TTFTP90 {
					row.TTFTOK = false
				}
			}
			row.TTFTApplies = l >= HalfCapacity && row.BestPeerName != ""
			rows = append(rows, row)
		}
	}
	return rows
}

// policyNotes describes each policy in one line for the report header.
func policyNotes(m Meta) []string {
	f, d, g := m.Base.Fleet, m.Base.Peers.Dynamo, m.Base.Peers.SGLang
	return []string{
		fmt.Sprintf("**kvroute:** the real kvroute.Router (DefaultConfig; peak prefill throughput calibrated to %s tokens/s), its index fed by the engines' KV events through kvevents (encode → decode → apply) %v after each engine step. **kvroute-prefill-only:** the same with OpenRequestTokens = 0, the default before open requests counted as load (the \"before\" of this change).",
			thousands(int(f.PrefillTokensPerSecond)), m.Base.EventDelay),
		fmt.Sprintf("**dynamo:** Dynamo's KV-router cost model, lowest cost wins (temperature %g): %g × max(in-flight prefill blocks + prompt blocks − %g × device overlap, 0) + active blocks + the request's new blocks; overlap from an index fed by the same events, or from its own decisions of the last %v if larger.",
			d.Temperature, d.PrefillLoadScale, d.OverlapScoreCredit, d.PredictedTTL),
		fmt.Sprintf("**sglang:** SGLang gateway cache_aware: least in-flight requests when imbalanced (max − min > %d and max > %g × min), else the longest match in its approximate tree of routed prompts if match ÷ prompt > %g, else least in-flight requests again (ties to the fewest requests sent). **sglang-events:** its event-driven path: when balanced, the engine holding the longest cached prefix of the prompt per the engines' KV events, whatever its length (ties to the lower load, then the smaller cache), else the least in-flight requests.",
			g.BalanceAbsThreshold, g.BalanceRelThreshold, g.CacheThreshold),
		"**lmetric:** LMetric (Dynamo's `lmetric` worker-selection formula, SGLang gateway's `lmetric` policy): lowest (prompt tokens − cached blocks × block size) × (in-flight requests + 1), ties to the engine with the fewest cached blocks; cached blocks from an index fed by the same events, or from its own decisions of the last " + m.Base.Peers.Dynamo.PredictedTTL.String() + " if larger, as Dynamo's.",
		fmt.Sprintf("**approximate:** learns only from its own decisions (TTL %v, at most the engine's GPU blocks per endpoint, least recently sent forgotten first); score = %g × prefix ratio + %g × queue score + %g × free KV, engine metrics scraped every %v. **least-load:** fewest committed in-flight prompt tokens. **round-robin.**",
			m.Base.ApproxTTL, m.Base.ApproxPrefixWeight, m.Base.ApproxQueueWeight, m.Base.ApproxKVWeight, m.Base.ScrapeInterval),
		fmt.Sprintf("**capacity bound:** Belady's optimal replacement over one pooled cache of the fleet's %s blocks, on each run's own trace; no routing can reuse more. **LRU-residency bound:** the same with the pooled cache shrunk by the blocks no request will hit that engines with vLLM's LRU must hold anyway (each engine keeps its last requests whole); no routing over such engines can reuse more (proof in bench/README.md). **infinite-cache ceiling:** every request reuses the longest prefix any earlier request left behind. **pooled LRU** (a reference, not a bound: a routing can partition the stream over LRU caches better than one cache does): the same pooled cache keeping every block it sees, least recently used evicted first, any block of a prompt a hit. **one engine** (a reference, not a bound): the same workload and load on one simulated engine with the fleet's whole cache, step budget, sequences and compute, so with the engines' own replacement and prefix-only hits; \"÷ one engine\" is kvroute's hit rate as a fraction of it.",
			thousands(m.Base.CacheBlocks())),
	}
}

// WriteMarkdown writes the report: settings, the target evaluation, then
// one table (and chart link) per workload with a row per load and policy
// plus the capacity bound.
func WriteMarkdown(w io.Writer, m Meta, results []Result) error {
	var b strings.Builder
	f := m.Base.Fleet
	fmt.Fprintf(&b, "# Routing-quality simulation\n\n")
	fmt.Fprintf(&b, "Produced by `%s` on %s in %s of host time. The simulation is deterministic: the same flags (seed %d) reproduce every figure on any machine.\n\n",
		m.Command, m.Generated.UTC().Format("2006-01-02 15:04 MST"), m.Wall.Round(time.Millisecond), m.Base.Seed)
	fmt.Fprintf(&b, "**Fleet:** %d simulated vLLM engines (simengine, virtual clock), each %d KV blocks of %d tokens, %s prefill tokens/s, %v per step, %d tokens per step, %d sequences; %d gateway replicas, each with its own instance of the policy.  \n",
		f.Engines, f.NumGPUBlocks, f.BlockSize, thousands(int(f.PrefillTokensPerSecond)), f.DecodeStep, f.MaxNumBatchedTokens, f.MaxNumSeqs, m.Base.GatewayReplicas)
	for _, n := range policyNotes(m) {
		b.WriteString(n + "  \n")
	}
	if m.Preamble != "" {
		b.WriteString(m.Preamble + "  \n")
	}
	fmt.Fprintf(&b, "**Load** is the offered request rate as a fraction of the fleet's prefill capacity with no cache hit (Σ engine speeds × prefill tokens/s ÷ mean prompt tokens). Hit rate is the engines' Σ prefix_cache_hits ÷ Σ prefix_cache_queries; \"÷ bound\" is it as a fraction of the capacity bound. TTFT is measured from arrival at the engine. Throughput is completed requests per second of virtual time. Imbalance is max ÷ mean over engines of prompt tokens actually computed. See bench/README.md for the model's assumptions.\n\n")

	b.WriteString("## Targets\n\n")
	fmt.Fprintf(&b, "Targets from the issue, reported and not tuned for: on every workload, kvroute's TTFT p90 below every peer policy's (%s) at every load ≥ %.1f; on shared-prefix, kvroute's hit rate ≥ %.0f %% of the capacity bound.\n\n",
		joinPolicies(PeerPolicies), HalfCapacity, BoundFraction*100)
	b.WriteString("| workload | load | kvroute TTFT p90 | best peer TTFT p90 | below every peer? | best other policy | kvroute hit rate | capacity bound | ÷ bound | ÷ one engine |\n")
	b.WriteString("|:---|---:|---:|---:|:---:|---:|---:|---:|---:|---:|\n")
	for _, t := range Targets(results) {
		below := "n/a (load < 0.5)"
		if t.TTFTApplies {
			below = yesNo(t.TTFTOK)
		} else if t.BestPeerName == "" {
			below = "n/a (no peer run)"
		}
		peer := "—"
		if t.BestPeerName != "" {
			peer = fmt.Sprintf("%s (%s)", dur(t.BestPeer), t.BestPeerName)
		}
		ratio := fmt.Sprintf("%.1f %%", t.Ratio()*100)
		if t.HitApplies {
			ratio += " " + yesNo(t.HitOK)
		}
		one := "—"
		if t.OneEngine > 0 {
			one = fmt.Sprintf("%.1f %%", t.HitRate/t.OneEngine*100)
		}
		fmt.Fprintf(&b, "| %s | %.2f | %s | %s | %s | %s (%s) | %s | %s | %s | %s |\n", t.Workload, t.Load, dur(t.TTFTP90), peer, below,
			dur(t.BestOther), t.BestOtherName, pct(t.HitRate), pct(t.Bound), ratio, one)
	}
	b.WriteString("\n")

	writeBeforeAfter(&b, results)
	writeMisses(&b, results)

	for _, wl := range m.Workloads {
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", wl.Kind, describe(wl))
		if svg := m.SVG[wl.Kind]; svg != "" {
			fmt.Fprintf(&b, "![TTFT p90 against load, %s](%s)\n\n", wl.Kind, svg)
		}
		b.WriteString("| load | offered QPS | policy | hit rate | ÷ bound | TTFT p50 | TTFT p90 | TTFT p99 | throughput (req/s) | imbalance | preemptions | events applied / dropped |\n")
		b.WriteString("|---:|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, l := range loadsOf(results, wl.Kind) {
			var bound, inf, lru, one, lruBound float64
			qps := 0.0
			for _, r := range results {
				if r.Workload != wl.Kind || r.Load != l {
					continue
				}
				qps = r.OfferedQPS
				if bound == 0 || r.Policy == KVRoute {
					bound, inf, lru, one, lruBound = r.BoundHitRate, r.InfiniteHitRate, r.PooledLRUHitRate, r.OneEngineHitRate, r.LRUBoundHitRate
				}
				ev := "—"
				if r.Policy.eventFed() {
					ev = fmt.Sprintf("%d / %d", r.EventsApplied, r.EventsDropped)
				}
				ratio := "—"
				if r.BoundHitRate > 0 {
					ratio = fmt.Sprintf("%.1f %%", r.HitRate/r.BoundHitRate*100)
				}
				fmt.Fprintf(&b, "| %.2f | %.1f | %s | %s | %s | %s | %s | %s | %.1f | %.2f | %d | %s |\n", l, r.OfferedQPS, r.Policy,
					pct(r.HitRate), ratio, dur(r.TTFTP50), dur(r.TTFTP90), dur(r.TTFTP99), r.Throughput, r.Imbalance, r.Preemptions, ev)
			}
			fmt.Fprintf(&b, "| %.2f | %.1f | *capacity bound* (infinite-cache ceiling %s; LRU-residency bound %s; pooled LRU %s; one engine %s) | %s | — | — | — | — | — | — | — | — |\n", l, qps, pct(inf), pct(lruBound), pct(lru), pct(one), pct(bound))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeBeforeAfter compares kvroute's default with kvroute-prefill-only
// (the default before open requests counted as load), when both ran.
func writeBeforeAfter(b *strings.Builder, results []Result) {
	var rows []string
	for _, kind := range kindsOf(results) {
		for _, l := range loadsOf(results, kind) {
			after, ok1 := find(results, kind, l, KVRoute)
			before, ok2 := find(results, kind, l, KVRoutePrefillOnly)
			if !ok1 || !ok2 {
				continue
			}
			rows = append(rows, fmt.Sprintf("| %s | %.2f | %s | %s | %s | %s | %.2f → %.2f |", kind, l, dur(before.TTFTP90), dur(after.TTFTP90),
				pct(before.HitRate), pct(after.HitRate), before.Imbalance, after.Imbalance))
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("## kvroute before and after counting open requests\n\n")
	b.WriteString("*Before* is kvroute-prefill-only (OpenRequestTokens = 0: the load score sees only prefill tokens not yet answered by a first token); *after* is the default (each open request adds 1,024 tokens of load), from the same run.\n\n")
	b.WriteString("| workload | load | TTFT p90 before | TTFT p90 after | hit rate before | hit rate after | imbalance before → after |\n|:---|---:|---:|---:|---:|---:|---:|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n\n")
}

func joinPolicies(ps []Policy) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// describe is a one-line description of a workload's shape.
func describe(w Workload) string {
	switch w.Kind {
	case SharedPrefix:
		return fmt.Sprintf("%d requests; %d groups × %d users; each prompt is its group's %d-token context plus one of the group's %d-token questions; %d output tokens.",
			w.Requests, w.Groups, w.Users, w.ContextTokens, w.QuestionTokens, w.OutputTokens)
	case MultiTurn:
		return fmt.Sprintf("%d requests; sessions of %d turns over %d shared %d-token system prompts; each turn resends the conversation plus a %d-token user message; %d-token answers; next turn %v (mean, exponential) after the answer.",
			w.Requests, w.Turns, w.SystemPrompts, w.SystemTokens, w.UserTokens, w.OutputTokens, w.ThinkTime)
	case ZipfDrift:
		return fmt.Sprintf("%d requests; the shared-prefix shape (%d groups × %d users, %d-token contexts, %d-token questions, %d output tokens) with groups drawn Zipf(s = %g) over a popularity ranking reshuffled at the start of each of %d equal phases.",
			w.Requests, w.Groups, w.Users, w.ContextTokens, w.QuestionTokens, w.OutputTokens, w.ZipfS, w.Phases)
	case Heterogeneous:
		return fmt.Sprintf("%d requests; the shared-prefix shape (%d groups × %d users, %d-token contexts, %d-token questions, %d output tokens) on a fleet where %.0f %% of the engines run every step %g× slower.",
			w.Requests, w.Groups, w.Users, w.ContextTokens, w.QuestionTokens, w.OutputTokens, w.SlowFraction*100, w.SlowFactor)
	}
	if w.Kind == Trace && w.Trace != nil {
		return describeTrace(w.Trace)
	}
	return fmt.Sprintf("%d requests; unique %d-token prompts; %d output tokens.", w.Requests, w.PromptTokens, w.OutputTokens)
}

func kindsOf(results []Result) []WorkloadKind {
	var kinds []WorkloadKind
	for _, r := range results {
		if !slices.Contains(kinds, r.Workload) {
			kinds = append(kinds, r.Workload)
		}
	}
	return kinds
}

func loadsOf(results []Result, kind WorkloadKind) []float64 {
	var loads []float64
	for _, r := range results {
		if r.Workload == kind && (len(loads) == 0 || loads[len(loads)-1] != r.Load) {
			loads = append(loads, r.Load)
		}
	}
	return loads
}

func find(results []Result, kind WorkloadKind, load float64, p Policy) (Result, bool) {
	for _, r := range results {
		if r.Workload == kind && r.Load == load && r.Policy == p {
			return r, true
		}
	}
	return Result{}, false
}

func pct(x float64) string { return fmt.Sprintf("%.1f %%", x*100) }

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// dur formats a duration with three significant figures in ms or s.
func dur(d time.Duration) string {
	switch s := d.Seconds(); {
	case s >= 10:
		return fmt.Sprintf("%.1f s", s)
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	default:
		return fmt.Sprintf("%.0f ms", s*1000)
	}
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// WriteCompactTable writes a short table of hit rate and TTFT p90 per load
// and policy, for sensitivity sections appended to the report.
func WriteCompactTable(w io.Writer, title, note string, results []Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n%s\n\n", title, note)
	b.WriteString("| workload | load | policy | hit rate | TTFT p90 | capacity bound |\n|:---|---:|:---|---:|---:|---:|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %.2f | %s | %s | %s | %s |\n", r.Workload, r.Load, r.Policy, pct(r.HitRate), dur(r.TTFTP90), pct(r.BoundHitRate))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
