package sim

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// TieOrders is the replica sweep's tie-order sensitivity at one load and
// replica count: the TTFT p90 of the same run (same traffic, same fleet,
// same shared-state model) under several tie-break orders, TieSeed 0 to
// n−1, where 0 is the sweep's own run. Nothing but the order in which each
// replica chooses among equally good endpoints changes, so the spread is
// how far the p90 moves by chance alone: where one replica's own p90
// moves more than ReplicaTolerance, a single run cannot tell R replicas
// within ReplicaTolerance of one from R replicas outside it.
type TieOrders struct {
	Load     float64         `json:"load"`
	Replicas int             `json:"replicas"`
	Mode     ReplicaMode     `json:"mode"`
	TTFTP90  []time.Duration `json:"ttftP90"` // per TieSeed 0, 1, …
}

// Min is the lowest p90 over the tie orders.
func (t TieOrders) Min() time.Duration { return slices.Min(t.TTFTP90) }

// Max is the highest p90 over the tie orders.
func (t TieOrders) Max() time.Duration { return slices.Max(t.TTFTP90) }

// Median is the median p90 over the tie orders (of an even count, the
// lower middle one).
func (t TieOrders) Median() time.Duration { return percentile(t.TTFTP90, 0.5) }

// Spread is Max/Min − 1: how far the p90 moved with the tie order alone.
func (t TieOrders) Spread() float64 {
	if lo := t.Min(); lo > 0 {
		return float64(t.Max())/float64(lo) - 1
	}
	return 0
}

// TieOrderSweep runs the tie-order sensitivity for every load and replica
// count: R = 1 and, for R > 1, the shared mode, each under orders tie-break
// orders. TieSeed 0 is taken from sweep (ReplicaSweep's results for the
// same base, loads and counts) when it holds the run, else run again.
// Deterministic, in load then replica-count order.
func TieOrderSweep(ctx context.Context, base Config, loads []float64, counts []int, shared SharedState, orders int, sweep []ReplicaResult, parallel int) ([]TieOrders, error) {
	if orders < 1 {
		return nil, fmt.Errorf("%w: tie orders %d < 1", ErrInvalidConfig, orders)
	}
	if err := shared.validate(); err != nil {
		return nil, err
	}
	known := map[[2]float64]Result{}
	for _, rr := range sweep {
		if rr.Replicas == 1 || rr.Mode == Shared {
			known[[2]float64{rr.Result.Load, float64(rr.Replicas)}] = rr.Result
		}
	}
	var out []TieOrders
	var jobs []simJob
	for _, l := range loads {
		for _, n := range counts {
			t := TieOrders{Load: l, Replicas: n, Mode: Shared, TTFTP90: make([]time.Duration, orders)}
			if n == 1 {
				t.Mode = LocalOnly
			}
			cfg := replicaConfig(base, l, n, &shared)
			row := len(out)
			for tie := 0; tie < orders; tie++ {
				if r, ok := known[[2]float64{l, float64(n)}]; ok && tie == 0 && base.TieSeed == 0 {
					t.TTFTP90[0] = r.TTFTP90
					continue
				}
				c := cfg
				c.TieSeed = base.TieSeed + uint64(tie)
				jobs = append(jobs, simJob{cfg: c, policy: KVRoute, what: fmt.Sprintf("tie order %d, %d replicas", tie, n),
					done: func(r Result) { out[row].TTFTP90[tie] = r.TTFTP90 }})
			}
			out = append(out, t)
		}
	}
	if err := runJobs(ctx, jobs, parallel); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteTieOrderTable writes the tie-order sensitivity as a Markdown
// section: per load and replica count the p90 under each tie order, their
// spread, and R > 1's median against one replica's median.
func WriteTieOrderTable(w io.Writer, ties []TieOrders) error {
	if len(ties) == 0 {
		return nil
	}
	single := map[float64]TieOrders{}
	for _, t := range ties {
		if t.Replicas == 1 {
			single[t.Load] = t
		}
	}
	n := len(ties[0].TTFTP90)
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	pf("\n### Tie-order sensitivity\n\n")
	pf("The same runs under %d tie-break orders (TieSeed 0–%d; 0 is the table above): the traffic, the fleet and the shared-state model are unchanged, only the order in which each replica chooses among equally good endpoints differs. ", n, n-1)
	pf("*Spread* is max/min − 1 of one row's p90s: for R = 1 it is how far one router's own p90 moves by chance. Where it exceeds %.0f %%, one run per row cannot tell R replicas within %.0f %% of one replica from R replicas outside it; the medians compare the two distributions instead.\n\n", ReplicaTolerance*100, ReplicaTolerance*100)
	pf("| load | R | TTFT p90 per tie order | min | median | max | spread | median vs R=1 median |\n")
	pf("|---:|---:|---|---:|---:|---:|---:|---:|\n")
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	for _, t := range ties {
		var each []string
		for _, d := range t.TTFTP90 {
			each = append(each, ms(d))
		}
		vs := "—"
		if s, ok := single[t.Load]; ok && t.Replicas > 1 && s.Median() > 0 {
			vs = fmt.Sprintf("%+.1f%%", (float64(t.Median())/float64(s.Median())-1)*100)
		}
		pf("| %.2f | %d | %s | %s | %s | %s | %.1f%% | %s |\n", t.Load, t.Replicas, strings.Join(each, ", "),
			ms(t.Min()), ms(t.Median()), ms(t.Max()), t.Spread()*100, vs)
	}
	var noisy []string
	for _, t := range ties {
		if t.Replicas == 1 && t.Spread() > ReplicaTolerance {
			noisy = append(noisy, fmt.Sprintf("%.2f (%.1f %%)", t.Load, t.Spread()*100))
		}
	}
	if len(noisy) > 0 {
		pf("\nOne replica's own TTFT p90 moved by more than %.0f %% with the tie order alone at load %s.\n", ReplicaTolerance*100, strings.Join(noisy, ", "))
	}
	return nil
}
