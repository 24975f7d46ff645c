package sim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// SeedRow is the replica sweep's comparison over traffic seeds at one load
// and replica count: the TTFT p90 of one replica and of R replicas sharing
// state, on the same traffic, for each of several seeds.
//
// Above full load one run's TTFT p90 is chaotic: a perturbation as small as
// one decision reaching the other replica a millisecond late changes every
// later queue, and the p90 of one 2,000-request run moves by tens of percent
// (at 1.5× on shared-prefix, one replica's own p90 ranges over 3× between
// seeds). One run per row therefore cannot tell R replicas within 5 % of
// one from R replicas outside it. The comparison that can is over seeds:
// the ratio of the mean p90s, paired by seed, with a bootstrap confidence
// interval.
type SeedRow struct {
	Load     float64         `json:"load"`
	Replicas int             `json:"replicas"`
	Seeds    []uint64        `json:"seeds"`
	Single   []time.Duration `json:"single"` // R = 1's TTFT p90 per seed
	Shared   []time.Duration `json:"shared"` // R replicas' (shared state) per seed; R = 1: Single
}

// MeanRatio is Σ Shared / Σ Single − 1: R replicas' mean TTFT p90 against
// one replica's over the same seeds.
func (r SeedRow) MeanRatio() float64 { return ratioOfSums(r.Shared, r.Single, nil) }

func ratioOfSums(a, b []time.Duration, idx []int) float64 {
	var sa, sb float64
	if idx == nil {
		for i := range a {
			sa, sb = sa+float64(a[i]), sb+float64(b[i])
		}
	} else {
		for _, i := range idx {
			sa, sb = sa+float64(a[i]), sb+float64(b[i])
		}
	}
	if sb == 0 {
		return 0
	}
	return sa/sb - 1
}

// bootstrapResamples is the number of resamples of SeedRow.CI.
const bootstrapResamples = 4000

// CI is the 95 % paired bootstrap interval of MeanRatio: seeds resampled
// with replacement, each keeping its pair, from a fixed source so the
// report is deterministic.
func (r SeedRow) CI() (lo, hi float64) {
	return pairedCI(r.Shared, r.Single, uint64(r.Replicas), uint64(r.Load*1000))
}

// pairedCI is the 95 % paired bootstrap interval of ratioOfSums(a, b):
// indices resampled with replacement, from a source seeded with s1, s2.
func pairedCI(a, b []time.Duration, s1, s2 uint64) (lo, hi float64) {
	n := len(b)
	if n == 0 || len(a) != n {
		return 0, 0
	}
	rng := rand.New(rand.NewPCG(s1, s2))
	idx := make([]int, n)
	rs := make([]float64, bootstrapResamples)
	for k := range rs {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		rs[k] = ratioOfSums(a, b, idx)
	}
	slices.Sort(rs)
	return rs[bootstrapResamples*25/1000], rs[bootstrapResamples*975/1000-1]
}

// Within is how many seeds' R-replica p90 is at most ReplicaTolerance above
// one replica's on that seed.
func (r SeedRow) Within() int {
	k := 0
	for i := range r.Single {
		if r.Single[i] > 0 && float64(r.Shared[i])/float64(r.Single[i])-1 <= ReplicaTolerance {
			k++
		}
	}
	return k
}

// ReplicaSeedShare is the per-seed target of the comparison over seeds: R
// replicas within ReplicaTolerance of one replica on at least this share
// of the seeds.
const ReplicaSeedShare = 0.95

// WithinOK reports the per-seed target: at least ReplicaSeedShare of the
// seeds within ReplicaTolerance.
func (r SeedRow) WithinOK() bool {
	return len(r.Single) > 0 && float64(r.Within()) >= ReplicaSeedShare*float64(len(r.Single))
}

// OK reports the target over seeds: R replicas' mean TTFT p90 at most
// ReplicaTolerance above one replica's.
func (r SeedRow) OK() bool { return r.MeanRatio() <= ReplicaTolerance }

func meanOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s / time.Duration(len(ds))
}

// SeedSweep runs, for every load and replica count, one replica and (R > 1)
// R replicas sharing state on base's workload with each seed; runs that
// known (ReplicaSweep results, any seed) already holds are taken from it.
// Deterministic, in load then replica-count order.
func SeedSweep(ctx context.Context, base Config, loads []float64, counts []int, shared SharedState, seeds []uint64, known map[uint64][]ReplicaResult, parallel int) ([]SeedRow, error) {
	if len(seeds) == 0 {
		return nil, fmt.Errorf("%w: no seeds", ErrInvalidConfig)
	}
	if err := shared.validate(); err != nil {
		return nil, err
	}
	have := map[[3]float64]Result{}
	for seed, rs := range known {
		for _, rr := range rs {
			if rr.Replicas == 1 || rr.Mode == Shared {
				have[[3]float64{float64(seed), rr.Result.Load, float64(rr.Replicas)}] = rr.Result
			}
		}
	}
	var out []SeedRow
	var jobs []simJob
	for _, l := range loads {
		first := len(out)
		for _, n := range counts {
			row := SeedRow{Load: l, Replicas: n, Seeds: seeds, Single: make([]time.Duration, len(seeds)), Shared: make([]time.Duration, len(seeds))}
			out = append(out, row)
			if n == 1 {
				continue
			}
			slot := len(out) - 1
			for i, seed := range seeds {
				if r, ok := have[[3]float64{float64(seed), l, float64(n)}]; ok {
					out[slot].Shared[i] = r.TTFTP90
					continue
				}
				c := replicaConfig(base, l, n, &shared)
				c.Seed = seed
				jobs = append(jobs, simJob{cfg: c, policy: KVRoute, what: fmt.Sprintf("seed %d, %d replicas", seed, n),
					done: func(r Result) { out[slot].Shared[i] = r.TTFTP90 }})
			}
		}
		// One replica's runs fill every row of this load.
		rows := out[first:len(out):len(out)]
		fill := func(i int, d time.Duration) {
			for k := range rows {
				rows[k].Single[i] = d
				if rows[k].Replicas == 1 {
					rows[k].Shared[i] = d
				}
			}
		}
		for i, seed := range seeds {
			if r, ok := have[[3]float64{float64(seed), l, 1}]; ok {
				fill(i, r.TTFTP90)
				continue
			}
			c := replicaConfig(base, l, 1, nil)
			c.Seed = seed
			jobs = append(jobs, simJob{cfg: c, policy: KVRoute, what: fmt.Sprintf("seed %d, 1 replica", seed),
				done: func(r Result) { fill(i, r.TTFTP90) }})
		}
	}
	if err := runJobs(ctx, jobs, parallel); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteSeedTable writes the comparison over seeds as a Markdown section and
// returns how many R > 1 rows meet the target and how many there are.
func WriteSeedTable(w io.Writer, rows []SeedRow) (met, total int, err error) {
	if len(rows) == 0 {
		return 0, 0, nil
	}
	for _, r := range rows {
		if r.Replicas > 1 {
			total++
			if r.OK() {
				met++
			}
		}
	}
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	n := len(rows[0].Seeds)
	pf("\n## Router replicas over %d traffic seeds (shared-prefix, shared state)\n\n", n)
	pf("Above full load one run's TTFT p90 is chaotic: one decision reaching the other replica a millisecond late changes every later queue, so a single run moves by tens of percent with any perturbation, and one replica's own p90 ranges over the seeds as the min–max column shows. ")
	pf("The same rows are therefore compared over seeds %s: *ratio* is R replicas' mean TTFT p90 against one replica's on the same seeds, with a 95 %% paired bootstrap interval (%d resamples); *within* counts the seeds on which R replicas were at most %.0f %% slower. ",
		seedRange(rows[0].Seeds), bootstrapResamples, ReplicaTolerance*100)
	pf("Target: ratio ≤ +%.0f %%. With the propagation at zero, R replicas make one replica's decisions exactly on every seed (ties are broken by hashing, not by each replica's own random draws), so what remains is the propagation delay of the shared state.\n\n", ReplicaTolerance*100)
	pf("Rows meeting the target over seeds: **%d of %d**. ", met, total)
	within := 0
	for _, r := range rows {
		if r.Replicas > 1 && r.WithinOK() {
			within++
		}
	}
	pf("Rows with R replicas within %.0f %% on at least %.0f %% of the seeds (the per-seed target): **%d of %d**.\n\n", ReplicaTolerance*100, ReplicaSeedShare*100, within, total)
	pf("| load | R | one replica: mean p90 (min–max) | R replicas: mean p90 | ratio | 95 %% interval | within %.0f %% | target |\n", ReplicaTolerance*100)
	pf("|---:|---:|---:|---:|---:|---:|---:|:---:|\n")
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	for _, r := range rows {
		if r.Replicas == 1 {
			continue
		}
		lo, hi := r.CI()
		mark := "✓"
		if !r.OK() {
			mark = "✗"
		}
		pf("| %.2f | %d | %s (%s–%s) | %s | %+.1f%% | %+.1f%% … %+.1f%% | %d of %d | %s |\n", r.Load, r.Replicas,
			ms(meanOf(r.Single)), ms(slices.Min(r.Single)), ms(slices.Max(r.Single)), ms(meanOf(r.Shared)),
			r.MeanRatio()*100, lo*100, hi*100, r.Within(), len(r.Seeds), mark)
	}
	return met, total, nil
}

// seedRange names a list of seeds, as "1–40" when consecutive.
func seedRange(seeds []uint64) string {
	consecutive := true
	for i := 1; i < len(seeds); i++ {
		if seeds[i] != seeds[i-1]+1 {
			consecutive = false
		}
	}
	if consecutive && len(seeds) > 2 {
		return fmt.Sprintf("%d–%d", seeds[0], seeds[len(seeds)-1])
	}
	var s []string
	for _, v := range seeds {
		s = append(s, fmt.Sprint(v))
	}
	return strings.Join(s, ", ")
}
