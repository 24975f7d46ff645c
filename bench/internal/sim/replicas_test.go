package sim

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// TestReplicaSweepDeterministicAndShaped runs a small sweep twice: the
// same results every time, one run for R = 1 and two (local-only, shared)
// for R > 1, every request completed, and a table with every row.
func TestReplicaSweepDeterministicAndShaped(t *testing.T) {
	base := Quick(1)
	base.Workload.Requests = 200
	loads, counts := []float64{0.5, 1.25}, []int{1, 2}
	sweep := func(parallel int) []ReplicaResult {
		res, err := ReplicaSweep(context.Background(), base, loads, counts, SharedState{}, parallel)
		require.NoError(t, err)
		for i := range res {
			res[i].Result.Wall = 0
		}
		return res
	}
	a, b := sweep(2), sweep(1)
	require.Equal(t, a, b, "same config, same results, whatever the parallelism")
	require.Len(t, a, len(loads)*3)
	for i, want := range []struct {
		n    int
		mode ReplicaMode
	}{{1, LocalOnly}, {2, LocalOnly}, {2, Shared}} {
		for l := range loads {
			r := a[l*3+i]
			require.Equal(t, want.n, r.Replicas)
			require.Equal(t, want.mode, r.Mode)
			require.Equal(t, loads[l], r.Result.Load)
			require.Equal(t, base.Workload.Requests, r.Result.Completed)
			require.Positive(t, r.Result.TTFTP90)
		}
	}
	rows := ReplicaRows(a)
	require.Len(t, rows, len(loads)*len(counts))
	require.Equal(t, rows[0].Single, rows[0].Shared, "R = 1 is its own reference")
	require.Zero(t, rows[0].SharedVs1)
	var md bytes.Buffer
	require.NoError(t, WriteReplicaTable(&md, base, SharedState{}, a))
	require.Contains(t, md.String(), "## Router replicas: local-only accounting vs shared state")
	require.Contains(t, md.String(), "| 1.25 | 2 |")
	require.Equal(t, len(rows)+2, bytes.Count(md.Bytes(), []byte("\n|")), "header, rule and one line per row")
}

// TestSharedStatePropagatesOnVirtualTime drives two real Routers joined
// through the virtual-time store by hand: a decision reaches the other
// replica's index one round trip after its flush, and so does the load it
// adds (the load change rides in the same message); the records supersede
// the change without counting it twice, and a replica that stops
// refreshing loses its load, changes included, with its lease.
func TestSharedStatePropagatesOnVirtualTime(t *testing.T) {
	defer leakcheck.Check(t)()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	rtt := 2 * time.Millisecond
	store := newVirtualRedis(clock, rtt)
	eps := []kvroute.Endpoint{{ID: "a:8000"}, {ID: "b:8000"}, {ID: "c:8000"}}
	var rts []*kvroute.Router
	var ms []*cluster.Manual
	rc := kvroute.DefaultConfig()
	rc.Model, rc.Events.Enabled, rc.DisableRender = simModel, new(false), true
	rc.Index.SweepInterval = -1
	for g := 0; g < 2; g++ {
		join := func(index *kvindex.Index, load *tokenload.Tracker) (*cluster.Replica, error) {
			m, err := cluster.NewManual(cluster.Config{Pool: "t", ReplicaID: []string{"g0", "g1"}[g], Lease: time.Second},
				index, load, store, cluster.Options{Set: telemetry.Set{Clock: virtualClock{now: clock}}})
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
			return m.Replica(), nil
		}
		r, err := kvroute.New(context.Background(), rc, kvroute.Options{Set: telemetry.Set{Clock: virtualClock{now: clock}}, NewClusterReplica: join})
		require.NoError(t, err)
		defer r.Close()
		require.NoError(t, r.SetEndpoints(eps))
		rts = append(rts, r)
	}
	rc.Cluster.Addrs = []string{"127.0.0.1:1"}
	_, err := kvroute.New(context.Background(), rc, kvroute.Options{NewClusterReplica: func(*kvindex.Index, *tokenload.Tracker) (*cluster.Replica, error) {
		t.Fatal("built a second replica")
		return nil, nil
	}})
	require.Error(t, err, "a router joins one pool: Config.Cluster or Options.NewClusterReplica, not both")

	prompt := make([]uint32, 640)
	for i := range prompt {
		prompt[i] = uint32(i + 7)
	}
	d, err := rts[0].Pick(context.Background(), &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: prompt}}}, eps)
	require.NoError(t, err)
	chosen := d.Endpoint.ID
	keys := kvindex.Keys(nil, prompt, 64, &kvindex.KeyParams{Model: simModel})
	held := func(g int) int {
		var mr kvindex.MatchResult
		rts[g].Index().Match(keys, []string{chosen}, &mr)
		return mr.Endpoints()[0].Blocks
	}
	local, _ := rts[0].Load().LocalLoad(chosen)
	require.Positive(t, local)
	require.Equal(t, 2, ms[0].Queued(), "the decision and the dispatch's load change")
	require.Equal(t, 2, ms[0].Flush())
	require.Zero(t, held(1), "in flight to the subscriber")
	tok, _, _ := rts[1].Load().Load(chosen)
	require.Zero(t, tok, "in flight to the subscriber")
	now = now.Add(rtt - 1)
	for _, msg := range store.deliver(now) {
		ms[1].Apply(msg)
	}
	require.Zero(t, held(1))
	now = now.Add(1)
	msgs := store.deliver(now)
	require.Len(t, msgs, 1)
	for _, m := range ms {
		m.Apply(msgs[0]) // the sender skips its own
	}
	require.Equal(t, len(keys), held(1), "the peer speculates the whole prefix after one round trip")
	tok, _, _ = rts[1].Load().Load(chosen)
	require.Equal(t, local, tok, "the peer sees the load it adds after the same round trip")

	// The records: replica 0 has never refreshed here, so a read that does
	// not list it yet keeps its changes (a replica that registered after
	// the read listed the members, its changes younger than a lease); the
	// read of the record that includes the change counts it once.
	ms[0].Refresh()
	ms[1].Read()
	tok, _, _ = rts[1].Load().Load(chosen)
	require.Equal(t, local, tok, "the refresh has not reached the read yet: the change is kept")
	now = now.Add(3 * rtt)
	ms[1].Read()
	tok, _, _ = rts[1].Load().Load(chosen)
	require.Equal(t, local, tok, "the record includes the change: counted once")

	// Replica 0 stops refreshing: its load goes with its lease.
	now = now.Add(time.Second - 3*rtt + rtt/2 - 1)
	ms[1].Read()
	tok, _, _ = rts[1].Load().Load(chosen)
	require.Equal(t, local, tok, "lease not yet over")
	now = now.Add(rtt * 2)
	ms[1].Read()
	tok, _, _ = rts[1].Load().Load(chosen)
	require.Zero(t, tok, "lease over: the dead replica's load is gone")
	d.Done(kvroute.DoneInfo{})
}

// TestIdealSharedStateDecidesAsOneRouter is the replica sweep's reference
// check of the shared state: R replicas whose decisions and load changes
// reach each other at once (the diagnostics' ideal sharing), whether they
// draw from one random source as one router would or each from its own,
// make exactly one router's decisions, pick by pick, with the same per-endpoint load in view (local
// plus the peers': no change counted twice, none missing, the records and
// the changes they include merged exactly). Any per-replica state that
// differs from one router's shows here as the first divergent pick.
func TestIdealSharedStateDecidesAsOneRouter(t *testing.T) {
	cfgOf := func(n int) Config {
		cfg := DefaultConfig(SharedPrefix, 1.5) // eight engines: picks from the first tens of milliseconds on
		cfg.Workload.Requests = 300
		cfg.GatewayReplicas, cfg.RoundRobinReplicas = n, true
		if n > 1 {
			s := SharedState{}.withDefaults()
			cfg.SharedState = &s
		}
		return cfg
	}
	one := newDiagnostics(7, true)
	want, err := runWith(cfgOf(1), KVRoute, one)
	require.NoError(t, err)
	require.Len(t, one.picks, 300)
	for _, n := range []int{2, 4} {
		// With one tie-break source, and with each replica's own: kvroute
		// breaks ties by hashing the request's first new block and the
		// endpoint, so the replicas' own random sources never decide.
		for _, d := range []*diagnostics{newDiagnostics(7, true), {ideal: true}} {
			got, err := runWith(cfgOf(n), KVRoute, d)
			require.NoError(t, err)
			require.Len(t, d.picks, len(one.picks))
			for i := range one.picks {
				a, b := one.picks[i], d.picks[i]
				require.Equal(t, i%n, b.replica)
				b.replica = 0
				require.Equal(t, a, b, "R = %d, own sources %v, pick %d: the first divergence from one router", n, d.random == nil, i)
			}
			require.Equal(t, want.TTFTP90, got.TTFTP90)
			require.Equal(t, want.HitRate, got.HitRate)
		}
	}
}

// TestSharedStatePublishesEveryLoadChange: a replica's first chunks and
// request ends queue load changes even when it routes nothing more, and
// the simulated publisher, like the cluster's, wakes for them; at no pick
// does a replica hold changes no flush will send.
func TestSharedStatePublishesEveryLoadChange(t *testing.T) {
	cfg := Quick(1.25)
	cfg.Workload.Requests = 300
	cfg.GatewayReplicas, cfg.RoundRobinReplicas = 4, true
	s := SharedState{}.withDefaults()
	cfg.SharedState = &s
	d := &diagnostics{}
	_, err := runWith(cfg, KVRoute, d)
	require.NoError(t, err)
	require.Len(t, d.picks, 300)
	require.Zero(t, d.unscheduled, "picks made while some replica held load changes its publisher would not send")
}

// TestSeedSweep: the comparison over seeds takes the runs a per-seed sweep
// already made, runs the others, is deterministic whatever the
// parallelism, pairs R replicas with one replica seed by seed, and its
// statistics are those of the pairs.
func TestSeedSweep(t *testing.T) {
	base := Quick(1.5)
	base.Workload.Requests = 120
	loads, counts, seeds := []float64{1.5}, []int{1, 2}, []uint64{1, 2, 3}
	b1 := base
	b1.Seed = 1
	sweep, err := ReplicaSweep(context.Background(), b1, loads, counts, SharedState{}, 2)
	require.NoError(t, err)
	rows, err := SeedSweep(context.Background(), base, loads, counts, SharedState{}, seeds, map[uint64][]ReplicaResult{1: sweep}, 2)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, sweep[0].Result.TTFTP90, rows[0].Single[0], "R = 1, seed 1: the sweep's run")
	require.Equal(t, sweep[2].Result.TTFTP90, rows[1].Shared[0], "R = 2 shared, seed 1: the sweep's run")
	again, err := SeedSweep(context.Background(), base, loads, counts, SharedState{}, seeds, nil, 1)
	require.NoError(t, err)
	require.Equal(t, rows, again, "deterministic, and the reused runs equal fresh ones")
	cfg := replicaConfig(base, 1.5, 2, &SharedState{})
	cfg.Seed = 3
	r, err := Run(cfg, KVRoute)
	require.NoError(t, err)
	require.Equal(t, r.TTFTP90, rows[1].Shared[2], "seed k is Config.Seed k")
	require.Equal(t, rows[0].Single, rows[1].Single, "every row of a load pairs with the same one-replica runs")
	require.Equal(t, rows[0].Single, rows[0].Shared)
	require.Zero(t, rows[0].MeanRatio())

	row := SeedRow{Load: 1.5, Replicas: 2, Seeds: seeds,
		Single: []time.Duration{100, 200, 300}, Shared: []time.Duration{110, 200, 330}}
	require.InDelta(t, 40.0/600, row.MeanRatio(), 1e-12)
	require.Equal(t, 1, row.Within(), "seeds 1 and 3 are 10 % slower, seed 2 equal")
	require.False(t, row.OK())
	lo, hi := row.CI()
	require.LessOrEqual(t, lo, row.MeanRatio())
	require.GreaterOrEqual(t, hi, row.MeanRatio())
	require.GreaterOrEqual(t, lo, 0.0, "every resample is at least as slow")
	require.LessOrEqual(t, hi, 0.1+1e-12, "and at most 10 % slower")

	var md bytes.Buffer
	met, total, err := WriteSeedTable(&md, rows)
	require.NoError(t, err)
	require.Equal(t, 1, total)
	require.Equal(t, rows[1].OK(), met == 1)
	require.Contains(t, md.String(), "## Router replicas over 3 traffic seeds")
	require.Contains(t, md.String(), "| 1.50 | 2 |")
	_, err = SeedSweep(context.Background(), base, loads, counts, SharedState{}, nil, nil, 1)
	require.ErrorIs(t, err, ErrInvalidConfig)
}
