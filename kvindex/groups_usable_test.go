package kvindex

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvroute/kvroute/telemetry"
	"github.com/stretchr/testify/require"
)

// usableRef is the straightforward reading of the groups' rule, which
// usable must match: try every L from n down and check, per group, the
// blocks its window needs before L. It costs up to n × window lookups.
func (hy *hybridEP) usableRef(keys []Key, n, bs int, spec *specHeld) int {
	for L := n; L > 0; L-- {
		if hy.allowsRef(keys, L, bs, spec) {
			return L
		}
	}
	return 0
}

func (hy *hybridEP) allowsRef(keys []Key, L, bs int, spec *specHeld) bool {
	for _, g := range hy.groups {
		switch g.kind {
		case GroupMamba:
			if g.held[keys[L-1]] == 0 && !spec.held(keys[L-1]) {
				return false
			}
		case GroupSlidingWindow:
			need := (g.window - 1 + bs - 1) / bs // ⌈(W−1)/R⌉ blocks before L
			for j := max(0, L-need); j < L; j++ {
				if g.held[keys[j]] == 0 && !spec.held(keys[j]) {
					return false
				}
			}
		}
	}
	return true
}

// usableCase is a random endpoint's groups over a random prompt.
type usableCase struct {
	hy   *hybridEP
	keys []Key
	n    int // blocks asked for (≤ len(keys))
	bs   int
}

// randomUsableCase draws up to maxGroupsTracked groups of random kinds and
// windows (from under one block to over the prompt), each holding the
// prompt's blocks but for holes at its own random density, clustered or
// scattered. base makes the keys distinct between cases.
func randomUsableCase(r *rand.Rand, base Key) usableCase {
	bss := []int{1, 2, 4, 16, 64}
	c := usableCase{bs: bss[r.IntN(len(bss))], hy: &hybridEP{}}
	c.keys = make([]Key, r.IntN(160))
	for i := range c.keys {
		c.keys[i] = base + Key(i)
	}
	c.n = len(c.keys)
	if c.n > 0 && r.IntN(4) == 0 {
		c.n = r.IntN(c.n + 1)
	}
	for g := range r.IntN(maxGroupsTracked + 1) {
		gs := &groupSet{group: int32(g), kind: GroupMamba, held: map[Key]uint32{}}
		if r.IntN(3) > 0 {
			gs.kind = GroupSlidingWindow
			gs.window = 1 + r.IntN(c.bs*(2+r.IntN(40)))
		}
		hole := []float64{0, 0.002, 0.02, 0.1, 0.5, 1}[r.IntN(6)]
		for i, k := range c.keys {
			if r.Float64() >= hole || i > 0 && gs.held[c.keys[i-1]] == 0 && r.IntN(2) == 0 {
				gs.held[k] = 1 + uint32(r.IntN(2))
			}
		}
		c.hy.groups = append(c.hy.groups, gs)
	}
	return c
}

// usable, which skips past a missing block instead of trying every shorter
// prefix, answers as the reference does on random groups: every kind mix,
// windows shorter than a block to longer than the prompt, hole densities
// from none to all, and blocks the endpoint holds speculatively (live,
// expired, or another endpoint's) filling some of the holes.
func TestUsableMatchesReference(t *testing.T) {
	clk := newFakeClock()
	ix := newTestIndex(t, Config{}, Options{Set: telemetry.Set{Clock: clk}})
	r := rand.New(rand.NewPCG(1, 2))
	var partial, specMatters int
	for i := 0; i < 3000; i++ {
		c := randomUsableCase(r, Key(i+1)<<20)
		var sp specHeld
		if r.IntN(2) == 0 {
			for _, k := range c.keys {
				switch r.IntN(8) {
				case 0:
					ix.Speculate("a", []Key{k}, time.Hour)
				case 1:
					ix.Speculate("a", []Key{k}, time.Millisecond) // expired below
				case 2:
					ix.Speculate("b", []Key{k}, time.Hour)
				}
			}
			ep, ok := ix.eps.Load("a")
			require.True(t, ok)
			sp = specHeld{ix: ix, id: ep.id, now: &lazyNow{}}
		}
		clk.Advance(time.Second)
		want := c.hy.usableRef(c.keys, c.n, c.bs, &sp)
		got := c.hy.usable(c.keys, c.n, c.bs, &sp)
		require.Equal(t, want, got, "case %d: %d blocks of %d tokens, %d groups", i, c.n, c.bs, len(c.hy.groups))
		if want > 0 && want < c.n {
			partial++
		}
		if sp.ix != nil && want != c.hy.usableRef(c.keys, c.n, c.bs, &specHeld{}) {
			specMatters++
		}
	}
	// The draws reach the interesting cases, not only 0 and n.
	require.Greater(t, partial, 300)
	require.Greater(t, specMatters, 50)
}

// BenchmarkUsable times usable against the reference on one endpoint's
// groups over a 2,048-block prompt, and reports how many times faster it
// is (ns/op is usable's alone). sparse-holes: a 64-block window whose group
// misses one block in 50, so no prefix is usable and the reference tries
// every L. whole: every block held, so both stop at once. mixed: a window
// missing one block in 37 of the last 300, and a Mamba group missing one
// in 7.
func BenchmarkUsable(b *testing.B) {
	const n, bs = 2048, 16
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key(i + 1)
	}
	group := func(kind GroupKind, window int, missing func(int) bool) *groupSet {
		g := &groupSet{kind: kind, window: window, held: map[Key]uint32{}}
		for i, k := range keys {
			if !missing(i) {
				g.held[k] = 1
			}
		}
		return g
	}
	cases := []struct {
		name   string
		groups []*groupSet
	}{
		{"sparse-holes", []*groupSet{group(GroupSlidingWindow, 64*bs+1, func(i int) bool { return i%50 == 49 })}},
		{"whole", []*groupSet{group(GroupSlidingWindow, 64*bs+1, func(int) bool { return false })}},
		{"mixed", []*groupSet{
			group(GroupSlidingWindow, 64*bs+1, func(i int) bool { return i > n-300 && i%37 == 0 }),
			group(GroupMamba, 0, func(i int) bool { return i%7 == 0 }),
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			hy := &hybridEP{groups: c.groups}
			var sp specHeld
			want := hy.usableRef(keys, n, bs, &sp)
			b.ReportAllocs()
			var ref time.Duration
			iters := 0
			for b.Loop() {
				iters++
				if got := hy.usable(keys, n, bs, &sp); got != want {
					b.Fatalf("usable = %d, reference %d", got, want)
				}
				b.StopTimer()
				t0 := time.Now()
				hy.usableRef(keys, n, bs, &sp)
				ref += time.Since(t0)
				b.StartTimer()
			}
			b.ReportMetric(float64(ref.Nanoseconds())/float64(iters), "ref-ns/op")
			if el := b.Elapsed(); el > 0 {
				b.ReportMetric(float64(ref)/float64(el), "x-faster")
			}
		})
	}
}
