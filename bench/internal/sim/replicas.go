package sim

import (
	"context"
	"fmt"
	"io"
	"time"
)

// ReplicaMode is how a run's kvroute gateway replicas account in-flight
// load in the replica sweep.
type ReplicaMode string

// The replica sweep's modes.
const (
	// LocalOnly: each replica sees only the load it dispatched itself, the
	// single-process accounting that makes two active-active replicas each
	// see about half of every endpoint's load.
	LocalOnly ReplicaMode = "local-only"
	// Shared: the replicas share their load and decisions through package
	// cluster (Config.SharedState).
	Shared ReplicaMode = "shared"
)

// ReplicaTolerance is the replica sweep's target: with shared state, R > 1
// replicas stay within this fraction of one replica's TTFT p90 at every
// load.
const ReplicaTolerance = 0.05

// ReplicaResult is one run of the replica sweep: R real kvroute Routers
// behind a round-robin spread, in one accounting mode. For R = 1 both modes
// are the same run.
type ReplicaResult struct {
	Replicas int         `json:"replicas"`
	Mode     ReplicaMode `json:"mode"`
	Result   Result      `json:"result"`
}

// ReplicaSweep runs the kvroute policy on base's workload at every load for
// every replica count, local-only and with shared state (one run for R =
// 1), requests spread round-robin over the replicas; results in load,
// replica count, mode order. Runs are deterministic and spread over
// parallel goroutines without changing any result.
func ReplicaSweep(ctx context.Context, base Config, loads []float64, counts []int, shared SharedState, parallel int) ([]ReplicaResult, error) {
	if err := shared.validate(); err != nil {
		return nil, err
	}
	type job struct {
		cfg  Config
		slot int
	}
	var jobs []job
	var out []ReplicaResult
	for _, l := range loads {
		for _, n := range counts {
			modes := []ReplicaMode{LocalOnly, Shared}
			if n == 1 {
				modes = modes[:1]
			}
			for _, m := range modes {
				var sh *SharedState
				if m == Shared {
					sh = &shared
				}
				cfg := replicaConfig(base, l, n, sh)
				if err := cfg.Validate(); err != nil {
					return nil, fmt.Errorf("replicas %d at load %v: %w", n, l, err)
				}
				jobs = append(jobs, job{cfg: cfg, slot: len(out)})
				out = append(out, ReplicaResult{Replicas: n, Mode: m})
			}
		}
	}
	runs := make([]simJob, len(jobs))
	for i, j := range jobs {
		runs[i] = simJob{cfg: j.cfg, policy: KVRoute, what: fmt.Sprintf("%d replicas, %s", out[j.slot].Replicas, out[j.slot].Mode),
			done: func(r Result) { out[j.slot].Result = r }}
	}
	if err := runJobs(ctx, runs, parallel); err != nil {
		return nil, err
	}
	return out, nil
}

// ReplicaRow is the sweep at one (load, replica count): both modes and the
// shared mode against one replica.
type ReplicaRow struct {
	Load      float64
	Replicas  int
	Local     Result
	Shared    Result
	Single    Result  // R = 1 at this load
	SharedVs1 float64 // Shared.TTFTP90 / Single.TTFTP90 - 1
	LocalVs1  float64
	OK        bool // SharedVs1 ≤ ReplicaTolerance: at most 5 % slower than one replica
}

// ReplicaRows arranges a sweep's results by load and replica count and
// evaluates the target (R = 1 rows compare with themselves).
func ReplicaRows(results []ReplicaResult) []ReplicaRow {
	var rows []ReplicaRow
	single := map[float64]Result{}
	for _, rr := range results {
		if rr.Replicas == 1 {
			single[rr.Result.Load] = rr.Result
		}
	}
	index := map[[2]float64]int{}
	for _, rr := range results {
		k := [2]float64{rr.Result.Load, float64(rr.Replicas)}
		i, ok := index[k]
		if !ok {
			i = len(rows)
			index[k] = i
			rows = append(rows, ReplicaRow{Load: rr.Result.Load, Replicas: rr.Replicas, Single: single[rr.Result.Load]})
		}
		switch {
		case rr.Replicas == 1:
			rows[i].Local, rows[i].Shared = rr.Result, rr.Result
		case rr.Mode == LocalOnly:
			rows[i].Local = rr.Result
		default:
			rows[i].Shared = rr.Result
		}
	}
	for i := range rows {
		r := &rows[i]
		if p := r.Single.TTFTP90; p > 0 {
			r.SharedVs1 = float64(r.Shared.TTFTP90)/float64(p) - 1
			r.LocalVs1 = float64(r.Local.TTFTP90)/float64(p) - 1
		}
		r.OK = r.SharedVs1 <= ReplicaTolerance
	}
	return rows
}

// WriteReplicaTable writes the replica sweep as a Markdown section: per
// load and replica count, TTFT p90 and hit rate local-only and shared, and
// the shared mode's TTFT p90 against one replica's.
func WriteReplicaTable(w io.Writer, base Config, shared SharedState, results []ReplicaResult) error {
	shared = shared.withDefaults()
	rows := ReplicaRows(results)
	ok := 0
	for _, r := range rows {
		if r.OK {
			ok++
		}
	}
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	pf("\n## Router replicas: local-only accounting vs shared state (%s, seed %d)\n\n", base.Workload.Kind, base.Seed)
	pf("R real kvroute Routers behind a round-robin spread, every one subscribed to every engine's KV events. ")
	pf("*Local-only*: each replica counts only the load it dispatched itself (about 1/R of every endpoint's), so its affinity filter and load score mis-gate. ")
	pf("*Shared*: the replicas form one pool of package cluster (leased load records; decisions and load changes over pub/sub), its Redis replaced in this virtual-clock run by an in-process store on the virtual clock; ")
	pf("a decision reaches the other replicas within publish interval %v + round trip %v = %v, and each load change (dispatch, first chunk, end), which the publisher sends at once, within the round trip %v; the records (refresh %v + read %v + round trip %v = %v old at most) supersede the changes they include and cover a lost one; a lease lasts %v.\n\n",
		shared.PublishInterval, shared.RedisRTT, shared.DecisionDelay(), shared.LoadChangeDelay(), shared.RefreshPeriod, shared.ReadPeriod, shared.RedisRTT, shared.LoadStaleness(), shared.Lease)
	pf("With the propagation delays at zero, R replicas make exactly one router's decisions, pick by pick, with the same per-endpoint load in view, whether they draw from one random source or each from its own: kvroute breaks ties by hashing the request's first new block and the endpoint ID (the simulation's test TestIdealSharedStateDecidesAsOneRouter); what still differs at R > 1 is that propagation.\n\n")
	pf("Target: with shared state, TTFT p90 at R > 1 within %.0f %% of R = 1's at every load: **%d of %d rows met**.\n\n", ReplicaTolerance*100, ok, len(rows))
	pf("| load | R | local-only TTFT p90 | local-only hit | vs R=1 | shared TTFT p90 | shared hit | vs R=1 | target |\n")
	pf("|---:|---:|---:|---:|---:|---:|---:|---:|:---:|\n")
	for _, r := range rows {
		mark := "✓"
		if !r.OK {
			mark = "✗"
		}
		pf("| %.2f | %d | %v | %.1f%% | %+.1f%% | %v | %.1f%% | %+.1f%% | %s |\n", r.Load, r.Replicas,
			r.Local.TTFTP90.Round(time.Millisecond), r.Local.HitRate*100, r.LocalVs1*100,
			r.Shared.TTFTP90.Round(time.Millisecond), r.Shared.HitRate*100, r.SharedVs1*100, mark)
	}
	return nil
}
