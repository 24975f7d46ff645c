package bench

import (
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kvindex"
)

// gcSample is the part of runtime/metrics the tail benchmark reads.
type gcSample struct {
	gcCPU, totalCPU float64 // seconds
	cycles          uint64
	pauses          *metrics.Float64Histogram
}

func readGC() gcSample {
	s := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/sched/pauses/total/gc:seconds"},
	}
	metrics.Read(s)
	return gcSample{gcCPU: s[0].Value.Float64(), totalCPU: s[1].Value.Float64(),
		cycles: s[2].Value.Uint64(), pauses: s[3].Value.Float64Histogram()}
}

// pauseTotal estimates the total GC pause time between two histograms
// (bucket midpoints; the open last bucket counts at its lower bound).
func pauseTotal(before, after *metrics.Float64Histogram) (total time.Duration, count uint64) {
	var sec float64
	for i := range after.Counts {
		n := after.Counts[i]
		if i < len(before.Counts) {
			n -= before.Counts[i]
		}
		if n == 0 {
			continue
		}
		lo, hi := after.Buckets[i], after.Buckets[i+1]
		mid := lo
		switch {
		case math.IsInf(lo, -1):
			mid = hi
		case !math.IsInf(hi, 1):
			mid = (lo + hi) / 2
		}
		sec += float64(n) * mid
		count += n
	}
	return time.Duration(sec * float64(time.Second)), count
}

// BenchmarkMatchUnderIngest measures Match latency percentiles on a large
// index while it is being written: one goroutine stores new 16-block
// events as fast as it can on 16 further endpoints, each capped at
// Config.MaxBlocksPerEndpoint (2^14) so their oldest blocks are evicted
// (the steady state of a busy fleet: every store also removes; the
// resident population is spread over enough endpoints to stay under the
// cap), and a second
// goroutine forces a garbage collection every 100 ms, so that several GC
// cycles fall inside the measurement whatever the allocation rate. The
// timed loop runs Matches of a 2,048-token prompt against 64 candidates
// holding a staircase of its prefixes, timing each one: b.N of them, and
// more until three GC cycles have completed inside the loop (at most two
// minutes), since runtime/metrics accounts GC CPU time at cycle ends.
//
// Reported: p50/p99/p99.9 latency (ns), p99/p50, the GC's share of all CPU
// time while the loop ran (runtime/metrics /cpu/classes/gc/total), the GC
// cycles and the total stop-the-world pause time, and the blocks stored per
// second by the ingesting goroutine. The 10^7 rung needs ≈ 1 GiB and runs
// only without -short.
func BenchmarkMatchUnderIngest(b *testing.B) {
	for _, m := range []struct {
		name string
		n    int
	}{{"1e6", 1e6}, {"1e7", 1e7}} {
		b.Run("memberships="+m.name, func(b *testing.B) {
			if m.n >= 1e7 && testing.Short() {
				b.Skip("the 10^7 rung needs ~1 GiB; skipped with -short")
			}
			fx := getIngestFixture(b, m.n)
			runUnderIngest(b, fx)
		})
	}
	// Release the last rung (≈ 1 GiB at 10^7) so that the benchmarks run
	// after this one in the same process (the report runs ScaleEndpoints
	// next) do not share the machine with its garbage collection.
	ingestMu.Lock()
	for _, fx := range ingestFixtures {
		fx.ix.Close()
	}
	clear(ingestFixtures)
	ingestMu.Unlock()
	runtime.GC()
}

// ingestFixture is one rung's index, built once per process.
type ingestFixture struct {
	scaleFixture
	ingest []string // the churned endpoints
	next   uint64   // next chain number of the ingesting goroutine
}

var (
	ingestMu       sync.Mutex
	ingestFixtures = map[int]*ingestFixture{}
)

const (
	ingestMinCycles = 3
	ingestMaxLoop   = 2 * time.Minute
	ingestEndpoints = 16
	ingestCap       = 1 << 14 // blocks per churned endpoint
)

func getIngestFixture(b *testing.B, memberships int) *ingestFixture {
	b.Helper()
	ingestMu.Lock()
	defer ingestMu.Unlock()
	if fx, ok := ingestFixtures[memberships]; ok {
		return fx
	}
	// Keep one rung at a time: drop the others before building.
	clear(ingestFixtures)
	runtime.GC()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1, MaxBlocksPerEndpoint: ingestCap}, kvindex.Options{})
	if err != nil {
		b.Fatal(err)
	}
	// Enough resident endpoints that none exceeds the cap (so nothing
	// resident is evicted); the first 64 are the candidates.
	eps := EndpointIDs(max(64, (memberships+ingestCap-129)/(ingestCap-128)))
	prompt := Tokens(1<<57, 2048)
	steps := Steps(64, len(prompt)/ix.BlockSize())
	if err := Staircase(ix, eps[:64], prompt, steps, 1<<50); err != nil {
		b.Fatal(err)
	}
	if _, err := Background(ix, eps, memberships-ix.Stats().Memberships, 64, 6); err != nil {
		b.Fatal(err)
	}
	fx := &ingestFixture{scaleFixture: scaleFixture{ix: ix, cands: eps[:64], steps: steps,
		keys: kvindex.Keys(nil, prompt, ix.BlockSize(), &kvindex.KeyParams{Model: Model})}}
	for i := 0; i < ingestEndpoints; i++ {
		fx.ingest = append(fx.ingest, fmt.Sprintf("ingest-%d", i))
	}
	ingestFixtures[memberships] = fx
	return fx
}

func runUnderIngest(b *testing.B, fx *ingestFixture) {
	ix := fx.ix
	bs := ix.BlockSize()
	var stop atomic.Bool
	var stored atomic.Int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // ingestion: new chains on the churned endpoints, capped
		defer wg.Done()
		buf := make([]uint32, 0, EventBlocks*bs)
		for !stop.Load() {
			c := fx.next
			fx.next++
			ep := fx.ingest[c%ingestEndpoints]
			buf = AppendTokens(buf[:0], 1<<45^c, EventBlocks*bs)
			if err := StoreChain(ix, ep, buf, c<<8); err != nil {
				panic(err)
			}
			// The cap is per index; trim the churned endpoints to theirs
			// by clearing one when it is far over.
			stored.Add(EventBlocks)
		}
	}()
	go func() { // the GC cycles during the measurement
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for !stop.Load() {
			<-t.C
			runtime.GC()
		}
	}()
	var out kvindex.MatchResult
	ix.Match(fx.keys, fx.cands, &out)
	lat := make([]int64, 0, b.N)
	g0, t0 := readGC(), time.Now()
	st0 := stored.Load()
	b.ReportAllocs()
	b.ResetTimer()
	// b.N Matches, and then more until at least ingestMinCycles GC cycles
	// completed inside the loop (runtime/metrics updates its CPU classes
	// at the end of each cycle), up to ingestMaxLoop.
	for i := 0; ; i++ {
		if i >= b.N && i%4096 == 0 {
			if readGC().cycles-g0.cycles >= ingestMinCycles || time.Since(t0) > ingestMaxLoop {
				break
			}
		}
		s := time.Now()
		ix.Match(fx.keys, fx.cands, &out)
		lat = append(lat, int64(time.Since(s)))
	}
	b.StopTimer()
	g1, el := readGC(), time.Since(t0)
	rate := float64(stored.Load()-st0) / el.Seconds()
	stop.Store(true)
	wg.Wait()
	for c, e := range out.Endpoints() {
		if e.Blocks != fx.steps[c] {
			b.Fatalf("candidate %d matched %d blocks, want %d", c, e.Blocks, fx.steps[c])
		}
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) }
	pause, pauses := pauseTotal(g0.pauses, g1.pauses)
	b.ReportMetric(q(0.5), "p50-ns")
	b.ReportMetric(q(0.99), "p99-ns")
	b.ReportMetric(q(0.999), "p99.9-ns")
	b.ReportMetric(q(0.99)/q(0.5), "p99/p50")
	if cpu := g1.totalCPU - g0.totalCPU; cpu > 0 {
		b.ReportMetric(100*(g1.gcCPU-g0.gcCPU)/cpu, "gc-cpu-%")
	}
	b.ReportMetric(float64(g1.cycles-g0.cycles), "gc-cycles")
	b.ReportMetric(float64(pause.Microseconds())/1000, "gc-pause-ms")
	b.ReportMetric(float64(pauses), "gc-pauses")
	b.ReportMetric(rate, "ingest-blocks/s")
	b.ReportMetric(float64(ix.Stats().Memberships), "memberships")
	b.ReportMetric(float64(len(lat)), "matches")
}
