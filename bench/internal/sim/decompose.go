package sim

import (
	"context"
	"fmt"
	"io"
	"time"
)

// ReplicaPart names one part of the replica decomposition: R replicas run
// again with one part of the shared state's propagation changed (or, for
// the control, one router perturbed), compared seed by seed with one
// router.
type ReplicaPart string

// The decomposition's parts.
const (
	// PartPublishAtOnce: every decision and load change is published the
	// moment it is queued (PublishInterval < 0); what remains is the round
	// trip through Redis.
	PartPublishAtOnce ReplicaPart = "publish-at-once"
	// PartExactLoad: every Pick sees the peers' exact load (SharedExact.Load);
	// what remains is the decisions' delay.
	PartExactLoad ReplicaPart = "exact-load"
	// PartExactAll: decisions and load changes reach the peers at once
	// (SharedExact.All); nothing remains.
	PartExactAll ReplicaPart = "exact-all"
	// PartLoopbackRedis: the modelled pool with a round trip to Redis of
	// LoopbackRTT instead of SharedState.RedisRTT, as a Redis on the
	// replicas' host or rack answers: how much of what remains is that
	// round trip.
	PartLoopbackRedis ReplicaPart = "loopback-redis"
	// PartControl: one router whose KV events arrive ControlShift later,
	// against one router: how far a perturbation far smaller than any
	// propagation delay moves one router's own p90.
	PartControl ReplicaPart = "control"
)

// LoopbackRTT is PartLoopbackRedis's round trip to Redis.
const LoopbackRTT = 100 * time.Microsecond

// ControlShift is the control's perturbation of Config.EventDelay.
const ControlShift = time.Microsecond

// AllReplicaParts lists the parts in report order.
var AllReplicaParts = []ReplicaPart{PartPublishAtOnce, PartLoopbackRedis, PartExactLoad, PartExactAll, PartControl}

// ParseReplicaPart returns the part named s.
func ParseReplicaPart(s string) (ReplicaPart, error) {
	for _, p := range AllReplicaParts {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: unknown replica decomposition part %q", ErrInvalidConfig, s)
}

// describe says what the part changes, for the report.
func (p ReplicaPart) describe() string {
	switch p {
	case PartPublishAtOnce:
		return "published at once (no publish interval): only the Redis round trip left"
	case PartLoopbackRedis:
		return fmt.Sprintf("Redis round trip %v (a Redis beside the replicas) instead of the modelled one", LoopbackRTT)
	case PartExactLoad:
		return "load exact at every pick: only the decisions' delay left"
	case PartExactAll:
		return "decisions and load exact: no propagation left"
	case PartControl:
		return fmt.Sprintf("control: one router, its KV events %v later", ControlShift)
	}
	return string(p)
}

// ReplicaPartRow is one line of the decomposition: the part and its
// comparison over seeds with one router (Single: one router's p90 per
// seed; Shared: the part's).
type ReplicaPartRow struct {
	Part ReplicaPart `json:"part"` // empty: the modelled pool
	SeedRow
}

// DecomposeReplicas runs each part over base's seeds at load with n
// replicas (the control with one), reusing one router's p90s of modelled
// (a SeedSweep row of that load and n) instead of running them again.
func DecomposeReplicas(ctx context.Context, base Config, modelled SeedRow, shared SharedState, parts []ReplicaPart, parallel int) ([]ReplicaPartRow, error) {
	known := map[uint64][]ReplicaResult{}
	for i, seed := range modelled.Seeds {
		known[seed] = []ReplicaResult{{Replicas: 1, Mode: LocalOnly, Result: Result{Load: modelled.Load, TTFTP90: modelled.Single[i]}}}
	}
	out := []ReplicaPartRow{{SeedRow: modelled}}
	for _, p := range parts {
		b, s, counts, k := base, shared, []int{1, modelled.Replicas}, known
		switch p {
		case PartPublishAtOnce:
			s.PublishInterval = -1
		case PartLoopbackRedis:
			s.RedisRTT = LoopbackRTT
		case PartExactLoad:
			s.Exact.Load = true
		case PartExactAll:
			s.Exact.All = true
		case PartControl:
			b.EventDelay += ControlShift
			counts, k = []int{1}, nil
		default:
			return nil, fmt.Errorf("%w: unknown replica decomposition part %q", ErrInvalidConfig, p)
		}
		rows, err := SeedSweep(ctx, b, []float64{modelled.Load}, counts, s, modelled.Seeds, k, parallel)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		row := rows[len(rows)-1]
		if p == PartControl {
			row = SeedRow{Load: modelled.Load, Replicas: 1, Seeds: modelled.Seeds, Single: modelled.Single, Shared: rows[0].Single}
		}
		out = append(out, ReplicaPartRow{Part: p, SeedRow: row})
	}
	return out, nil
}

// WriteReplicaParts writes the decomposition as a Markdown section.
func WriteReplicaParts(w io.Writer, shared SharedState, rows []ReplicaPartRow) {
	if len(rows) == 0 {
		return
	}
	shared = shared.withDefaults()
	m := rows[0]
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	pf("\n## What R = %d replicas lose against one router, part by part (load %.2f, seeds %s)\n\n", m.Replicas, m.Load, seedRange(m.Seeds))
	pf("Each line runs the same seeds again with one part of the shared state's propagation switched off or shortened (the simulation's SharedExact, PublishInterval and RedisRTT; a deployment cannot switch them off) and compares with one router seed by seed, as the table over seeds does. ")
	pf("The control runs one router whose KV events arrive %v later than the reference's: a perturbation far below any propagation delay.\n\n", ControlShift)
	pf("| variant | within %.0f %% | identical p90 | ratio | 95 %% interval |\n|---|---:|---:|---:|---:|\n", ReplicaTolerance*100)
	for _, r := range rows {
		name := fmt.Sprintf("modelled pool (decision ≤ %v, load change ≤ %v, records ≤ %v)", shared.DecisionDelay(), shared.LoadChangeDelay(), shared.LoadStaleness())
		if r.Part != "" {
			name = r.Part.describe()
		}
		lo, hi := r.CI()
		pf("| %s | %d of %d | %d | %+.1f%% | %+.1f%% … %+.1f%% |\n", name, r.Within(), len(r.Seeds), r.Identical(), r.MeanRatio()*100, lo*100, hi*100)
	}
}

// Identical is how many seeds gave R replicas exactly one router's p90.
func (r SeedRow) Identical() int {
	k := 0
	for i := range r.Single {
		if r.Single[i] == r.Shared[i] {
			k++
		}
	}
	return k
}
