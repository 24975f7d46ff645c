package sim

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kvroute/kvroute/simengine"
)

// PDReach is the reachability bound of one target row whose other
// policy's TTFT p90 lies below the fastest a split document can be served
// (PDSplitFloor): there, only documents prefilled on a decode engine can
// be at or below that p90, and the bound asks whether enough of them can
// be, for any decider, on the row's own traffic.
type PDReach struct {
	Load     float64       `json:"load"`
	Seed     uint64        `json:"seed"`
	Other    PDPolicy      `json:"other"`
	OtherP90 time.Duration `json:"otherP90"`
	// SplitFloor is the least TTFT of a split document (PDSplitFloor).
	SplitFloor time.Duration `json:"splitFloor"`
	// Documents is the trace's one-off documents; Need how many of them
	// must be at or below OtherP90 for the decider's p90 to be, even if
	// every chat turn is.
	Documents int `json:"documents"`
	Need      int `json:"need"`
	// MaxLocal is the most documents the decode engines can prefill each
	// within OtherP90 of its arrival (PDMaxLocalDocuments): an upper bound
	// for every decider.
	MaxLocal int `json:"maxLocal"`
	// Unreachable is MaxLocal < Need: no decider meets the row.
	Unreachable bool `json:"unreachable"`
}

// PDSplitFloor is the least time to first token of a split document of
// c's workload: its prefill (its tokens at the engine's compute, in at
// least one step per MaxNumBatchedTokens), the transfer of every prompt
// token but the last (a one-off document's blocks are cached nowhere),
// and the decoder's step that recomputes the last token — no queue
// anywhere.
func PDSplitFloor(c PDConfig) time.Duration {
	f, doc := c.Base.Fleet, c.Workload.DocumentTokens
	steps := (doc + f.MaxNumBatchedTokens - 1) / f.MaxNumBatchedTokens
	return time.Duration(steps+1)*f.DecodeStep + computeTime(doc+1, f.PrefillTokensPerSecond) + c.Transfer.time(doc-1)
}

func computeTime(tokens int, perSecond float64) time.Duration {
	return time.Duration(float64(tokens) / perSecond * float64(time.Second))
}

// PDMaxLocalDocuments is an upper bound on how many of arrivals (the
// documents' arrival times, ascending) c.Decode decode engines can prefill
// each within t of its arrival, with the engines doing nothing else: each
// document needs DocumentTokens of its engine's compute after its arrival
// and one step's fixed cost before its first token; a request runs on one
// engine. With equal work and equal windows, first come first served is
// optimal on one engine (earliest deadline first never preempts), so the
// bound is the exact maximum over every assignment of documents to
// engines, found by a search over the engines' busy-until times that
// keeps only the undominated states.
func PDMaxLocalDocuments(c PDConfig, arrivals []time.Duration, t time.Duration) int {
	f := c.Base.Fleet
	work := computeTime(c.Workload.DocumentTokens, f.PrefillTokensPerSecond)
	m := c.Decode
	if m < 1 || t < work+f.DecodeStep {
		return 0
	}
	type state struct {
		n    int
		busy []time.Duration // ascending: when each engine is free
	}
	front := []state{{busy: make([]time.Duration, m)}}
	var next []state
	for _, a := range arrivals {
		next = next[:0]
		for _, s := range front {
			skip := state{n: s.n, busy: make([]time.Duration, m)}
			for i, b := range s.busy {
				skip.busy[i] = max(b, a) // an engine free before a is free at a
			}
			slices.Sort(skip.busy)
			next = append(next, skip)
			for i := range m {
				if i > 0 && skip.busy[i] == skip.busy[i-1] {
					continue // the same choice as the engine before
				}
				if skip.busy[i]+work+f.DecodeStep > a+t {
					break // ascending: no later engine is free sooner
				}
				take := state{n: s.n + 1, busy: slices.Clone(skip.busy)}
				take.busy[i] += work
				slices.Sort(take.busy)
				next = append(next, take)
			}
		}
		// Keep the states no other dominates (as many documents or more,
		// every engine free as soon or sooner).
		slices.SortStableFunc(next, func(x, y state) int { return y.n - x.n })
		front = front[:0]
		for _, s := range next {
			dominated := false
			for _, k := range front {
				if k.n >= s.n && dominates(k.busy, s.busy) {
					dominated = true
					break
				}
			}
			if !dominated {
				front = append(front, s)
			}
		}
		front = slices.Clone(front)
	}
	best := 0
	for _, s := range front {
		best = max(best, s.n)
	}
	return best
}

func dominates(x, y []time.Duration) bool {
	for i := range x {
		if x[i] > y[i] {
			return false
		}
	}
	return true
}

// PDReachability bounds each of rows' cells whose other policy's p90 is
// below PDSplitFloor(c): on that seed's traffic (c's capacity, the row's
// load), how many documents must be at or below it (the p90's nearest
// rank, every chat turn counted at or below) against how many the decode
// engines could prefill in time (PDMaxLocalDocuments). Both favour the
// decider: its decoders decode nothing and its chat turns wait for
// nothing.
func PDReachability(c PDConfig, rows []PDSeedRow) []PDReach {
	floor := PDSplitFloor(c)
	var out []PDReach
	for _, r := range rows {
		for _, cell := range r.PerSeed {
			if cell.OtherP90 >= floor {
				continue
			}
			cc := c
			cc.Load, cc.Base.Seed = r.Load, cell.Seed
			tr := newPDTrace(cc, simengine.DefaultStart)
			var docs []time.Duration
			for _, u := range tr.units {
				if u.session < 0 {
					docs = append(docs, u.at.Sub(simengine.DefaultStart))
				}
			}
			n := cc.Workload.Requests
			rank := int(0.9*float64(n)+0.999999) - 1 // percentile's nearest rank, 0-based
			need := max(rank+1-(n-len(docs)), 0)
			x := PDReach{Load: r.Load, Seed: cell.Seed, Other: r.Other, OtherP90: cell.OtherP90, SplitFloor: floor,
				Documents: len(docs), Need: need, MaxLocal: PDMaxLocalDocuments(cc, docs, cell.OtherP90)}
			x.Unreachable = x.MaxLocal < x.Need
			out = append(out, x)
		}
	}
	return out
}

// WritePDReachMarkdown appends the reachability bounds to a P/D report.
func WritePDReachMarkdown(w io.Writer, c PDConfig, rs []PDReach) error {
	if len(rs) == 0 {
		return nil
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	f := c.Base.Fleet
	p("## Reachability: rows no decider can meet\n\n")
	p("A split document's TTFT is at least %s (PDSplitFloor: its %d tokens' prefill at %.0f tokens/s and a step, the transfer of %d tokens, the decoder's step for the last token). Where the other policy's p90 is below that, only documents prefilled on one of the %d decode engines can be at or below it, and the decider's p90 (nearest rank, 90 %% of %d requests) is at or below it only if enough are: every request but the documents counted at or below. The most documents the decode engines can prefill within that p90 of their arrival (PDMaxLocalDocuments) is computed on each seed's own arrivals, exactly over every assignment of documents to engines, with the decode engines doing nothing else (no decode, no chat prefill) — both favour the decider.\n\n",
		fmtTTFT(PDSplitFloor(c)), c.Workload.DocumentTokens, f.PrefillTokensPerSecond, c.Workload.DocumentTokens-1, c.Decode, c.Workload.Requests)
	p("| load | seed | vs | other's p90 | documents | must be at or below | decoders can, at most | reachable |\n|---|---|---|---|---|---|---|---|\n")
	un := 0
	for _, r := range rs {
		mark := "yes"
		if r.Unreachable {
			mark, un = "**no**", un+1
		}
		p("| %g× | %d | %s | %.1f ms | %d | %d | %d | %s |\n", r.Load, r.Seed, r.Other, float64(r.OtherP90)/float64(time.Millisecond), r.Documents, r.Need, r.MaxLocal, mark)
	}
	p("\n%d of these %d rows are unreachable for any decider on this fleet and traffic.\n\n", un, len(rs))
	_, err := io.WriteString(w, b.String())
	return err
}
