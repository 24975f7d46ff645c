package sim

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// PDSeedRow is one target row over several traffic seeds: on how many the
// decider's TTFT p90 was at or below the other policy's, and both mean
// p90s.
type PDSeedRow struct {
	Load       float64       `json:"load"`
	Other      PDPolicy      `json:"other"`
	Met        int           `json:"met"`
	Seeds      int           `json:"seeds"`
	DeciderP90 time.Duration `json:"deciderMeanP90"`
	OtherP90   time.Duration `json:"otherMeanP90"`
	// PerSeed is the row on each seed, in seed order.
	PerSeed []PDSeedCell `json:"perSeed"`
}

// PDSeedCell is one target row on one seed.
type PDSeedCell struct {
	Seed       uint64        `json:"seed"`
	DeciderP90 time.Duration `json:"deciderP90"`
	OtherP90   time.Duration `json:"otherP90"`
	Met        bool          `json:"met"`
}

// RunPDSeeds runs the study on each seed (c's capacity kept, so every
// seed offers the same rates; done, when not nil, is the study of its
// seed, not run again) and tallies each target row over them.
func RunPDSeeds(c PDConfig, seeds []uint64, loads []float64, parallel int, done *PDStudy) ([]PDSeedRow, error) {
	var studies []PDStudy
	for _, s := range seeds {
		if done != nil && done.Config.Base.Seed == s {
			studies = append(studies, *done)
			continue
		}
		cc := c
		cc.Base.Seed = s
		st, err := RunPDStudy(cc, loads, AllPDPolicies, parallel)
		if err != nil {
			return nil, fmt.Errorf("seed %d: %w", s, err)
		}
		studies = append(studies, st)
	}
	var rows []PDSeedRow
	for _, l := range loads {
		if l < PDTargetMinLoad {
			continue
		}
		for _, p := range []PDPolicy{PDAggregated, PDAlways, PDDynamo} {
			row := PDSeedRow{Load: l, Other: p, Seeds: len(studies)}
			var ds, os time.Duration
			for _, st := range studies {
				d, _ := st.Result(PDDecider, l)
				o, _ := st.Result(p, l)
				ds, os = ds+d.TTFTP90, os+o.TTFTP90
				met := d.TTFTP90 <= o.TTFTP90
				if met {
					row.Met++
				}
				row.PerSeed = append(row.PerSeed, PDSeedCell{Seed: st.Config.Base.Seed, DeciderP90: d.TTFTP90, OtherP90: o.TTFTP90, Met: met})
			}
			if n := time.Duration(len(studies)); n > 0 {
				row.DeciderP90, row.OtherP90 = ds/n, os/n
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// WritePDSeedsMarkdown appends the seeds' tally to a P/D report.
func WritePDSeedsMarkdown(w io.Writer, seeds []uint64, rows []PDSeedRow) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	names := make([]string, len(seeds))
	for i, s := range seeds {
		names[i] = fmt.Sprint(s)
	}
	p("## Over traffic seeds %s\n\n", strings.Join(names, ", "))
	p("One run's p90 near and above capacity moves with the traffic's draw; here each target row over %d seeds (the same capacity and offered rates): on how many seeds the decider was at or below, and the mean p90s.\n\n", len(seeds))
	p("| load | decider ≤ | met on | decider mean p90 | other's mean p90 |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		p("| %g× | %s | %d of %d | %s | %s |\n", r.Load, r.Other, r.Met, r.Seeds, fmtTTFT(r.DeciderP90), fmtTTFT(r.OtherP90))
	}
	p("\nPer seed and load: the decider's TTFT p90 against each other policy's, ✓ where it is at or below.\n\n| load | seed | decider p90 |")
	others := []PDPolicy{PDAggregated, PDAlways, PDDynamo}
	for _, o := range others {
		p(" vs %s |", o)
	}
	p("\n|---|---|---|")
	for range others {
		p("---|")
	}
	p("\n")
	var missed []string
	for i := 0; i+len(others) <= len(rows); i += len(others) {
		group := rows[i : i+len(others)]
		for k := range group[0].PerSeed {
			p("| %g× | %d | %s |", group[0].Load, group[0].PerSeed[k].Seed, fmtTTFT(group[0].PerSeed[k].DeciderP90))
			for _, r := range group {
				c := r.PerSeed[k]
				mark := "✓"
				if !c.Met {
					mark = "✗"
					missed = append(missed, fmt.Sprintf("%g× seed %d vs %s (%s vs %s)", r.Load, c.Seed, r.Other, fmtTTFT(c.DeciderP90), fmtTTFT(c.OtherP90)))
				}
				p(" %s %s |", mark, fmtTTFT(c.OtherP90))
			}
			p("\n")
		}
	}
	if len(missed) == 0 {
		p("\nEvery row met on every seed.\n")
	} else {
		p("\n%d of %d rows missed: %s.\n", len(missed), len(rows)*len(seeds), strings.Join(missed, "; "))
	}
	p("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
