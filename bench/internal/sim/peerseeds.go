package sim

import (
	"context"
	"fmt"
	"io"
	"time"
)

// PeerSeedRow is kvroute against the peers' policies over traffic seeds at
// one (workload, load): each policy's TTFT p90 on the same traffic, per
// seed. One overloaded run's p90 is chaotic (a single different decision
// early on changes every later queue), so "kvroute below every peer" judged
// on one seed can flip with the seed; over seeds, the means compare the
// policies and the paired bootstrap interval says how well.
type PeerSeedRow struct {
	Workload WorkloadKind               `json:"workload"`
	Load     float64                    `json:"load"`
	Seeds    []uint64                   `json:"seeds"`
	TTFTP90  map[Policy][]time.Duration `json:"ttftP90"` // per policy, per seed
}

// BestPeer is the peer policy with the lowest mean TTFT p90 over the seeds.
func (r PeerSeedRow) BestPeer() Policy {
	best, bestMean := Policy(""), time.Duration(0)
	for _, p := range PeerPolicies {
		ds, ok := r.TTFTP90[p]
		if !ok {
			continue
		}
		if m := meanOf(ds); best == "" || m < bestMean {
			best, bestMean = p, m
		}
	}
	return best
}

// Ratio is kvroute's mean TTFT p90 against the best peer's, − 1 (negative:
// kvroute is faster).
func (r PeerSeedRow) Ratio() float64 {
	return ratioOfSums(r.TTFTP90[KVRoute], r.TTFTP90[r.BestPeer()], nil)
}

// CI is the 95 % paired bootstrap interval of Ratio (seeds resampled with
// replacement, from a fixed source).
func (r PeerSeedRow) CI() (lo, hi float64) {
	return pairedCI(r.TTFTP90[KVRoute], r.TTFTP90[r.BestPeer()], uint64(len(r.Workload)), uint64(r.Load*1000))
}

// Below counts the seeds on which kvroute's p90 is strictly below every
// peer's.
func (r PeerSeedRow) Below() int {
	c := 0
	for i, d := range r.TTFTP90[KVRoute] {
		ok := true
		for _, p := range PeerPolicies {
			if ds, has := r.TTFTP90[p]; has && ds[i] <= d {
				ok = false
			}
		}
		if ok {
			c++
		}
	}
	return c
}

// OK reports the target over seeds: kvroute's mean p90 strictly below every
// peer's mean.
func (r PeerSeedRow) OK() bool {
	k := meanOf(r.TTFTP90[KVRoute])
	for _, p := range PeerPolicies {
		if ds, ok := r.TTFTP90[p]; ok && meanOf(ds) <= k {
			return false
		}
	}
	return true
}

// PeerSeedSweep runs kvroute and the peer policies on every (workload,
// load) with each seed (base supplies the rest; no one-engine references,
// which only the decomposition needs). Deterministic, in workload then load
// order.
func PeerSeedSweep(ctx context.Context, base Config, workloads []Workload, loads []float64, seeds []uint64, parallel int) ([]PeerSeedRow, error) {
	return PeerSeedSweepKnown(ctx, base, workloads, loads, seeds, nil, parallel)
}

// PeerRun names one run of the comparison over seeds.
type PeerRun struct {
	Workload WorkloadKind
	Load     float64
	Policy   Policy
	Seed     uint64
}

// PeerSeedSweepKnown is PeerSeedSweep taking the TTFT p90 of the runs that
// known holds from it instead of running them (an earlier report's runs of
// policies whose code has not changed since: every run is deterministic, so
// a run repeated gives the same figure).
func PeerSeedSweepKnown(ctx context.Context, base Config, workloads []Workload, loads []float64, seeds []uint64, known map[PeerRun]time.Duration, parallel int) ([]PeerSeedRow, error) {
	if len(seeds) == 0 {
		return nil, fmt.Errorf("%w: no seeds", ErrInvalidConfig)
	}
	policies := append([]Policy{KVRoute}, PeerPolicies...)
	var out []PeerSeedRow
	var jobs []simJob
	for _, w := range workloads {
		for _, l := range loads {
			row := PeerSeedRow{Workload: w.Kind, Load: l, Seeds: seeds, TTFTP90: map[Policy][]time.Duration{}}
			for _, p := range policies {
				row.TTFTP90[p] = make([]time.Duration, len(seeds))
			}
			out = append(out, row)
			slot := len(out) - 1
			for _, p := range policies {
				for i, s := range seeds {
					if d, ok := known[PeerRun{w.Kind, l, p, s}]; ok {
						out[slot].TTFTP90[p][i] = d
						continue
					}
					cfg := base
					cfg.Workload, cfg.Load, cfg.Seed = w, l, s
					if err := cfg.Validate(); err != nil {
						return nil, fmt.Errorf("%s at load %v: %w", w.Kind, l, err)
					}
					jobs = append(jobs, simJob{cfg: cfg, policy: p, what: fmt.Sprintf("%s, %s, seed %d", w.Kind, p, s),
						done: func(r Result) { out[slot].TTFTP90[p][i] = r.TTFTP90 }})
				}
			}
		}
	}
	if err := runJobs(ctx, jobs, parallel); err != nil {
		return nil, err
	}
	return out, nil
}

// WritePeerSeedTable writes the comparison over seeds as a Markdown section
// and returns how many rows meet the target over seeds and how many there
// are.
func WritePeerSeedTable(w io.Writer, rows []PeerSeedRow) (met, total int, err error) {
	if len(rows) == 0 {
		return 0, 0, nil
	}
	for _, r := range rows {
		total++
		if r.OK() {
			met++
		}
	}
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	pf("\n## kvroute against the peers' policies over %d traffic seeds\n\n", len(rows[0].Seeds))
	pf("Each row runs kvroute and every peer policy (%s) on the same traffic with seeds %s. *Best peer* has the lowest mean TTFT p90 over the seeds; *ratio* is kvroute's mean against it, − 1, with a 95 %% paired bootstrap interval (%d resamples); *below on* counts the seeds on which kvroute's p90 is strictly below every peer's. Target over seeds: kvroute's mean below every peer's mean.\n\n",
		joinPolicies(PeerPolicies), seedRange(rows[0].Seeds), bootstrapResamples)
	pf("Rows meeting the target over seeds: **%d of %d**.\n\n", met, total)
	pf("| workload | load | kvroute mean p90 | best peer: mean p90 | ratio | 95 %% interval | below on | target |\n")
	pf("|:---|---:|---:|---:|---:|---:|---:|:---:|\n")
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	for _, r := range rows {
		lo, hi := r.CI()
		mark := "✓"
		if !r.OK() {
			mark = "✗"
		}
		bp := r.BestPeer()
		pf("| %s | %.2f | %s | %s: %s | %+.2f%% | %+.2f%% … %+.2f%% | %d of %d | %s |\n", r.Workload, r.Load,
			ms(meanOf(r.TTFTP90[KVRoute])), bp, ms(meanOf(r.TTFTP90[bp])), r.Ratio()*100, lo*100, hi*100, r.Below(), len(r.Seeds), mark)
	}
	return met, total, nil
}
