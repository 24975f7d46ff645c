package bench

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// ratioBatch is how many operations one timed slice of BenchmarkRatio runs
// before switching between the benchmark and its floor.
const ratioBatch = 64

// interleave runs op and floor in alternating timed batches of ratioBatch
// until each has run b.N times, so that both see the same machine load, and
// reports op's time per operation as ns/op, the floor's as floor-ns/op and
// the median of the per-pair time ratios as x-floor. between runs outside
// the timed slices (fixture upkeep). Allocations are op's and the floor's
// together; the floors allocate nothing.
func interleave(b *testing.B, op, floor, between func()) {
	interleaveAs(b, "", "floor-ns/op", op, floor, between)
}

// interleaveAs is interleave reporting the floor's time per operation as
// floorUnit and, besides x-floor, the ratio as ratioUnit too (when not empty).
func interleaveAs(b *testing.B, ratioUnit, floorUnit string, op, floor, between func()) {
	var tOp, tFloor time.Duration
	ratios := make([]float64, 0, b.N/ratioBatch+1)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += ratioBatch {
		n := min(ratioBatch, b.N-done)
		b.StopTimer()
		between()
		b.StartTimer()
		t0 := time.Now()
		for i := 0; i < n; i++ {
			op()
		}
		t1 := time.Now()
		for i := 0; i < n; i++ {
			floor()
		}
		t2 := time.Now()
		tOp, tFloor = tOp+t1.Sub(t0), tFloor+t2.Sub(t1)
		ratios = append(ratios, float64(t1.Sub(t0))/float64(max(t2.Sub(t1), 1)))
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(float64(tOp.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(tFloor.Nanoseconds())/float64(b.N), floorUnit)
	b.ReportMetric(ratios[len(ratios)/2], "x-floor")
	if ratioUnit != "" {
		b.ReportMetric(ratios[len(ratios)/2], ratioUnit)
	}
}

// BenchmarkRatio measures each headline operation against its floor in
// interleaved batches: Match/tokens=2048/endpoints=64 against FloorMatch,
// Match/tokens=2048/endpoints=64,holders=4[,blocks=1572864[,oldest]] (every
// block held by four endpoints, see sharedFleet; oldest: the prompt's
// blocks stored before all others) against FloorMatch built for its
// answer over as many entries as the index has blocks,
// Keys/tokens=2048 against FloorHash and Apply/blocks=16 against
// FloorApply. x-floor is the ratio the targets are stated in
// (≤ 1.3 for both Matches, ≤ 1.2 and ≤ 2); absolute times on a shared
// machine move with its load, the ratio much less.
func BenchmarkRatio(b *testing.B) {
	nop := func() {}
	b.Run("Match/tokens=2048/endpoints=64", func(b *testing.B) {
		w := getWarm(b)
		keys := kvindex.Keys(nil, w.p2k, w.ix.BlockSize(), &kvindex.KeyParams{Model: Model})
		cands := w.endpoints[:64]
		var out kvindex.MatchResult
		w.ix.Match(keys, cands, &out)
		floor, check := floorMatch(w.steps2k, floorEntries)
		interleave(b, func() { w.ix.Match(keys, cands, &out) }, floor, nop)
		if err := check(); err != nil {
			b.Fatal(err)
		}
		for c, e := range out.Endpoints() {
			if e.Blocks != w.steps2k[c] || e.GPU != w.steps2k[c] {
				b.Fatalf("candidate %d: %+v, want %d GPU blocks", c, e, w.steps2k[c])
			}
		}
	})
	b.Run("Match/tokens=2048/endpoints=64,holders=4", func(b *testing.B) { benchMatchShared(b, 1<<20, false) })
	b.Run("Match/tokens=2048/endpoints=64,holders=4,blocks=1572864", func(b *testing.B) { benchMatchShared(b, 3<<19, false) })
	b.Run("Match/tokens=2048/endpoints=64,holders=4,blocks=1572864,oldest", func(b *testing.B) { benchMatchShared(b, 3<<19, true) })
	b.Run("Keys/tokens=2048", func(b *testing.B) {
		toks := Tokens(7, 2048)
		p := &kvindex.KeyParams{Model: Model}
		want := kvindex.RootKey(Model)
		for i := 0; i+kvindex.DefaultBlockSize <= len(toks); i += kvindex.DefaultBlockSize {
			want = kvindex.ChainKey(want, toks[i:i+kvindex.DefaultBlockSize], nil)
		}
		dst := make([]kvindex.Key, 0, 64)
		floor, check := floorHash()
		interleave(b, func() { dst = kvindex.Keys(dst, toks, kvindex.DefaultBlockSize, p) }, floor, nop)
		if err := check(); err != nil {
			b.Fatal(err)
		}
		if len(dst) != 32 || dst[31] != want {
			b.Fatalf("%d keys, last %x, want 32 ending in %x", len(dst), dst[len(dst)-1], want)
		}
	})
	b.Run("Pick/tokens=2048/endpoints=64", benchPickRatio)
	b.Run(fmt.Sprintf("Apply/blocks=%d", applyBlocks), func(b *testing.B) {
		f := getApply(b)
		for _, ep := range f.targets {
			f.ix.Clear(ep)
		}
		floor, floorBetween, _, check, err := floorApply()
		if err != nil {
			b.Fatal(err)
		}
		d := wire.NewDecoder(wire.Limits{})
		var batch wire.Batch
		stored, next, ops := 0, 0, 0
		op := func() {
			if err := d.Decode(f.payloads[next], &batch); err != nil {
				b.Fatal(err)
			}
			stored += f.applier.Apply(f.endpoints[next], Model, &batch).StoredBlocks
			next++
			ops++
		}
		between := func() {
			floorBetween()
			if next+ratioBatch > len(f.payloads) {
				for _, ep := range f.targets {
					f.ix.Clear(ep)
				}
				next = 0
			}
		}
		interleave(b, op, floor, between)
		if err := check(); err != nil {
			b.Fatal(err)
		}
		if stored != applyBlocks*ops {
			b.Fatalf("stored %d blocks, want %d", stored, applyBlocks*ops)
		}
	})
}
