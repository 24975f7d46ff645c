package cluster_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
)

// warmIndex gives every endpoint a different share of p plus unrelated
// prompts, as the root package's Pick benchmark does.
func warmIndex(b *testing.B, r *kvroute.Router, eps []kvroute.Endpoint, p []uint32) {
	bs := r.Index().BlockSize()
	nb := len(p) / bs
	for i, e := range eps {
		held := 1 + i%nb
		hashes := make([]uint64, held)
		for j := range hashes {
			hashes[j] = uint64(i*1_000_000 + j + 1)
		}
		if err := r.Index().Store(e.ID, &kvindex.StoreEvent{EngineHashes: hashes, Tokens: p[:held*bs],
			BlockSize: bs, Model: testModel, Group: -1}); err != nil {
			b.Fatal(err)
		}
		for k := 0; k < 16; k++ {
			other := prompt(1000+i*64+k, len(p))
			hs := make([]uint64, nb)
			for j := range hs {
				hs[j] = uint64(i*1_000_000 + (k+1)*1000 + j)
			}
			if err := r.Index().Store(e.ID, &kvindex.StoreEvent{EngineHashes: hs, Tokens: other,
				BlockSize: bs, Model: testModel, Group: -1}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPick compares Pick without and with the cluster option in one
// run: with it, a peer replica's load is in the tracker, every decision is
// queued for publishing and the background loops (refresh, read, publish)
// run at their default periods, their allocations amortized into B/op.
// cluster=on reports its ratio to cluster=off.
func BenchmarkPick(b *testing.B) {
	srv := redistest.Start(b)
	const tokens, nEps = 2048, 64
	eps := endpoints(nEps)
	p := prompt(1, tokens)
	var offNs float64
	for _, on := range []bool{false, true} {
		name := "cluster=off"
		if on {
			name = "cluster=on"
		}
		b.Run(name, func(b *testing.B) {
			cfg := kvroute.DefaultConfig()
			cfg.Model = testModel
			cfg.Events.Enabled = new(false)
			cfg.DisableRender = true
			if on {
				cfg.Cluster = cluster0(srv.Addr, "bench-a")
				peerCfg := cfg
				peerCfg.Cluster = cluster0(srv.Addr, "bench-b")
				// The peer lives in this process: its applying a's decisions
				// would count in a's allocations, so it publishes load only.
				peerCfg.Cluster.DisableSharedDecisions = true
				peer, err := kvroute.New(context.Background(), peerCfg, kvroute.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if err := peer.SetEndpoints(eps); err != nil {
					b.Fatal(err)
				}
				defer peer.Close()
				for i := 0; i < nEps; i++ {
					defer peer.Load().Dispatch(eps[i].ID, 100).Done()
				}
			}
			r, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			if err := r.SetEndpoints(eps); err != nil {
				b.Fatal(err)
			}
			if on { // wait for the peer's next refresh and our next read
				deadline := time.Now().Add(waitFor)
				for tok, _, _ := r.Load().Load(eps[0].ID); tok != 100; tok, _, _ = r.Load().Load(eps[0].ID) {
					if time.Now().After(deadline) {
						b.Fatalf("peer load not seen: %d", tok)
					}
					time.Sleep(time.Millisecond) // polling the awaited state
				}
			}
			warmIndex(b, r, eps, p)
			req := &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: p}}}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d, err := r.Pick(ctx, req, eps)
				if err != nil {
					b.Fatal(err)
				}
				if d.CachedTokens != tokens {
					b.Fatalf("picked %s with %d cached tokens; the fully warm endpoint holds %d", d.Endpoint.ID, d.CachedTokens, tokens)
				}
				d.Done(kvroute.DoneInfo{})
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if !on {
				offNs = ns
			} else if offNs > 0 {
				b.ReportMetric(ns/offNs, "x-cluster-off")
			}
		})
	}
}

// BenchmarkPickInterleaved runs Pick on a router without and one with the
// cluster option alternately, in blocks of 64 picks each, so that a busy
// machine's changing load hits both alike; it reports each one's ns/pick and
// their ratio (allocs/op covers both Picks of an iteration), and the
// allocations the cluster option adds to one Pick (it fails if any).
func BenchmarkPickInterleaved(b *testing.B) {
	srv := redistest.Start(b)
	const tokens, nEps, block = 2048, 64, 64
	eps := endpoints(nEps)
	p := prompt(1, tokens)
	mk := func(c cluster.Config) *kvroute.Router {
		cfg := kvroute.DefaultConfig()
		cfg.Model = testModel
		cfg.Events.Enabled = new(false)
		cfg.DisableRender = true
		cfg.Cluster = c
		r, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(r.Close)
		if err := r.SetEndpoints(eps); err != nil {
			b.Fatal(err)
		}
		return r
	}
	peerCfg := cluster0(srv.Addr, "il-b")
	peerCfg.DisableSharedDecisions = true
	peer := mk(peerCfg)
	for i := 0; i < nEps; i++ {
		defer peer.Load().Dispatch(eps[i].ID, 100).Done()
	}
	off, on := mk(cluster.Config{}), mk(cluster0(srv.Addr, "il-a"))
	deadline := time.Now().Add(waitFor)
	for tok, _, _ := on.Load().Load(eps[0].ID); tok != 100; tok, _, _ = on.Load().Load(eps[0].ID) {
		if time.Now().After(deadline) {
			b.Fatalf("peer load not seen: %d", tok)
		}
		time.Sleep(time.Millisecond) // polling the awaited state
	}
	warmIndex(b, off, eps, p)
	warmIndex(b, on, eps, p)
	req := &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	ctx := context.Background()
	var spent [2]time.Duration
	var picks [2]int
	run := func(k int, r *kvroute.Router, n int) {
		start := time.Now()
		for j := 0; j < n; j++ {
			d, err := r.Pick(ctx, req, eps)
			if err != nil {
				b.Fatal(err)
			}
			if d.CachedTokens != tokens {
				b.Fatalf("picked %s with %d cached tokens", d.Endpoint.ID, d.CachedTokens)
			}
			d.Done(kvroute.DoneInfo{})
		}
		spent[k] += time.Since(start)
		picks[k] += n
	}
	allocs := func(r *kvroute.Router) float64 {
		return testing.AllocsPerRun(100, func() {
			d, err := r.Pick(ctx, req, eps)
			if err != nil {
				b.Fatal(err)
			}
			d.Done(kvroute.DoneInfo{})
		})
	}
	extra := allocs(on) - allocs(off)
	if extra > 0 && !raceEnabled {
		b.Fatalf("Pick with the cluster option allocates %.1f more times than without", extra)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += block {
		n := min(block, b.N-i)
		if (i/block)%2 == 0 {
			run(0, off, n)
			run(1, on, n)
		} else {
			run(1, on, n)
			run(0, off, n)
		}
	}
	offNs := float64(spent[0].Nanoseconds()) / float64(picks[0])
	onNs := float64(spent[1].Nanoseconds()) / float64(picks[1])
	b.ReportMetric(offNs, "ns/pick-off")
	b.ReportMetric(onNs, "ns/pick-on")
	b.ReportMetric(onNs/offNs, "on/off")
	b.ReportMetric(extra, "extra-allocs/pick")
}

// cluster0 is the default cluster configuration (250 ms periods, 3 s lease).
func cluster0(addr, id string) cluster.Config {
	return cluster.Config{Addrs: []string{addr}, Pool: "bench", ReplicaID: id}
}

// BenchmarkRedisOpsAt1000RPS paces two replicas at 1,000 requests/s each
// (one Pick per replica per millisecond; each iteration is one millisecond)
// with the default periods and reports the Redis commands per second per
// replica, counted by the replicas and by the server (INFO commandstats),
// the bytes per published decision and the decisions per PUBLISH.
func BenchmarkRedisOpsAt1000RPS(b *testing.B) {
	srv := redistest.Start(b)
	eps := endpoints(8)
	mk := func(id string) *kvroute.Router {
		cfg := kvroute.DefaultConfig()
		cfg.Model = testModel
		cfg.Events.Enabled = new(false)
		cfg.DisableRender = true
		cfg.Cluster = cluster0(srv.Addr, id)
		r, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.SetEndpoints(eps); err != nil {
			b.Fatal(err)
		}
		return r
	}
	ra, rb := mk("ops-a"), mk("ops-b")
	defer ra.Close()
	defer rb.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	reqs := make([]*kvroute.Request, 64) // 64 prefixes of 2,048 tokens
	for i := range reqs {
		reqs[i] = &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: prompt(10+i, 2048)}}}
	}
	ctx := context.Background()
	a0, b0 := ra.Cluster().Stats(), rb.Cluster().Stats()
	s0 := serverCalls(b, rdb)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		<-tick.C // pacing the offered load, not synchronizing
		for _, r := range []*kvroute.Router{ra, rb} {
			d, err := r.Pick(ctx, reqs[i%len(reqs)], eps)
			if err != nil {
				b.Fatal(err)
			}
			d.FirstChunk()
			d.Done(kvroute.DoneInfo{})
		}
	}
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	a1, b1 := ra.Cluster().Stats(), rb.Cluster().Stats()
	s1 := serverCalls(b, rdb)
	cmds := float64(a1.Commands - a0.Commands + b1.Commands - b0.Commands)
	pub := float64(a1.Published - a0.Published + b1.Published - b0.Published)
	msgs := float64(a1.Messages - a0.Messages + b1.Messages - b0.Messages)
	bytes := float64(a1.PublishedBytes - a0.PublishedBytes + b1.PublishedBytes - b0.PublishedBytes)
	b.ReportMetric(float64(b.N)/elapsed, "req/s/replica")
	b.ReportMetric(cmds/2/elapsed, "redis-cmds/s/replica")
	b.ReportMetric(float64(s1-s0-1)/2/elapsed, "server-calls/s/replica") // minus our own INFO
	if pub > 0 {
		b.ReportMetric(bytes/pub, "bytes/decision")
		b.ReportMetric(pub/msgs, "decisions/publish")
		// Each request's dispatch, first chunk and end ride in the same
		// messages: bytes/decision includes them.
		b.ReportMetric(float64(a1.Deltas-a0.Deltas+b1.Deltas-b0.Deltas)/pub, "load-changes/decision")
	}
	b.ReportMetric(float64(a1.Dropped-a0.Dropped+b1.Dropped-b0.Dropped), "dropped")
}

// serverCalls sums the calls of every command the server has run.
func serverCalls(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		i := strings.Index(line, "calls=")
		if i < 0 {
			continue
		}
		rest := line[i+len("calls="):]
		if j := strings.IndexByte(rest, ','); j >= 0 {
			rest = rest[:j]
		}
		n, _ := strconv.ParseInt(rest, 10, 64)
		total += n
	}
	return total
}
