package sim

import (
	"fmt"
	"io"
	"strings"
)

// WriteMissesTable writes the Misses decomposition of every kvroute result
// under its own title and note, for sections appended to the report (the
// single-replica sensitivity sweep).
func WriteMissesTable(w io.Writer, title, note string, results []Result) error {
	var b strings.Builder
	rows := missRows(results)
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(&b, "## %s\n\n%s\n\n", title, note)
	b.WriteString(missHeader)
	b.WriteString(strings.Join(rows, "\n") + "\n\n")
	_, err := io.WriteString(w, b.String())
	return err
}

const missHeader = "| workload | load | kvroute hit rate | capacity bound | LRU-residency bound | ÷ LRU-residency bound | one engine | ÷ one engine | bound misses | LRU residency | replacement | placement | routing (gate / below threshold / not indexed / other) | in flight | duplication |\n" +
	"|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"

// writeMisses writes where kvroute's misses go on every workload and load:
// the Misses decomposition of each kvroute result, in hit-rate points.
func writeMisses(b *strings.Builder, results []Result) {
	rows := missRows(results)
	if len(rows) == 0 {
		return
	}
	b.WriteString("## Where kvroute's misses go\n\n")
	b.WriteString(missNote)
	b.WriteString(missHeader)
	b.WriteString(strings.Join(rows, "\n") + "\n\n")
}

// missRows formats one table row per kvroute result with a decomposition.
func missRows(results []Result) []string {
	var rows []string
	for _, kind := range kindsOf(results) {
		if kind == NoReuse {
			continue // nothing to reuse, nothing to decompose
		}
		for _, l := range loadsOf(results, kind) {
			r, ok := find(results, kind, l, KVRoute)
			if !ok || r.Misses == nil {
				continue
			}
			m := r.Misses
			ratio, lru := "—", "—"
			if r.OneEngineHitRate > 0 {
				ratio = fmt.Sprintf("%.1f %%", r.HitRate/r.OneEngineHitRate*100)
			}
			if r.LRUBoundHitRate > 0 {
				lru = fmt.Sprintf("%.1f %%", r.HitRate/r.LRUBoundHitRate*100)
			}
			rows = append(rows, fmt.Sprintf("| %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (%s / %s / %s / %s) | %s | %s |",
				kind, l, pct(r.HitRate), pct(r.BoundHitRate), pct(r.LRUBoundHitRate), lru, pct(r.OneEngineHitRate), ratio,
				pts(m.Compulsory+m.BeladyCapacity), pts(m.Residency), pts(m.Replacement), pts(m.Placement),
				pts(m.Routing), pts(m.RoutingGate), pts(m.RoutingBelowThreshold), pts(m.RoutingUnknown), pts(m.RoutingWarmer),
				pts(m.InFlight), pct(m.Duplication)))
		}
	}
	return rows
}

const missNote = "The gap between the capacity bound and kvroute's hit rate, in hit-rate points (bound − LRU residency − replacement − placement − routing − in flight = hit rate). " +
	"The fleet's caches are observed exactly at each arrival (every engine step's KV events applied at once to an index no policy reads). " +
	"**One engine** is a reference, not a bound: the same workload at the same load on one simulated engine holding the whole fleet's KV cache, step budget, sequences and compute — the fleet as if routing could pool its caches, with the engines' own replacement (LRU, tail blocks evicted first, prefix-only hits). " +
	"**Bound misses**: misses of the bound itself (first touches, plus capacity misses even Belady cannot avoid). " +
	"**LRU-residency bound**: a bound on any routing over engines with vLLM's LRU (proven in bench/README.md): Belady over the pooled cache less the blocks no request will hit (a prompt's last block, answers) that every engine must still hold for its last requests. " +
	"**LRU residency**: bound − LRU-residency bound, what those blocks cost whatever the routing. " +
	"**Replacement**: LRU-residency bound − one engine, the rest of what the engines' LRU loses against Belady with the same cache (it evicts by recency, not next use); measured, not proven out of routing's reach. " +
	"**Placement**: one engine − the longest prefix any engine held at arrival; duplicated prefixes and uneven cache pressure across engines (negative: the split caches did better). " +
	"**Routing**: the longest prefix any engine held − the chosen engine's, split by the affinity filter's outcome: TTFT gate / below the affinity threshold (the warmest engine held less than 80 % of the prompt) / not in the router's index yet / other (a less warm kept endpoint won on load). " +
	"**In flight**: held by the chosen engine at arrival but not hit at admission (negative: requests in flight computed it meanwhile). " +
	"**Duplication**: mean share of the fleet's cached blocks that are extra copies.\n\n"

// pts formats a hit-rate fraction as points.
func pts(x float64) string { return fmt.Sprintf("%.1f", x*100) }
