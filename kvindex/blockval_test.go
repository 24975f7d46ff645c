package kvindex

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// refMembership draws a membership of endpoint id in one of the shapes the
// block map distinguishes: standard ungrouped or in group 0 (the implicit
// form's), standard in another group (standard, but not agreeing with the
// others above the ID), GPU counted twice (complex), CPU, GPU and CPU, or
// speculative.
func refMembership(rng *rand.Rand, id uint32) uint64 {
	enc := func(ps ...pair) uint64 { m, _ := encodePairs(id, ps); return m }
	switch r := rng.IntN(20); {
	case r < 7:
		return uint64(id) | stdPattern<<24 // GPU only, ungrouped
	case r < 12:
		return enc(pair{tier: 0, group: 0, count: 1})
	case r < 14:
		return enc(pair{tier: 0, group: 1, count: 1})
	case r < 15:
		return enc(pair{tier: 0, group: 0, count: 2})
	case r < 17:
		return enc(pair{tier: 1, group: 0, count: 1})
	case r < 18:
		return enc(pair{tier: 0, group: 0, count: 1}, pair{tier: 1, group: 0, count: 1})
	default:
		return makeSpec(id, uint64(1+rng.IntN(3))<<30)
	}
}

// checkBlockVal checks every reader of v against want (endpoint ID →
// membership) and the form v takes against its definition.
func checkBlockVal(t *testing.T, v blockVal, want map[uint32]uint64, absent []uint32, what string) {
	t.Helper()
	require.Equal(t, len(want), v.count(), what)
	var buf memberBuf
	ms := v.members(&buf)
	got := map[uint32]uint64{}
	for i, m := range ms {
		got[memberID(m)] = m
		fm, at := v.find(memberID(m))
		require.Equal(t, m, fm, "%s: find(%d)", what, memberID(m))
		require.Equal(t, i, at, "%s: find(%d)'s position", what, memberID(m))
	}
	require.Equal(t, want, got, what)
	for _, id := range absent {
		if _, ok := want[id]; !ok {
			m, at := v.find(id)
			require.Zero(t, m, "%s: find(%d) of an absent ID", what, id)
			require.Equal(t, -1, at, what)
		}
	}
	require.Equal(t, otherHolderRef(ms, 0), otherHolder(&v, 0), what)
	for _, m := range ms {
		require.Equal(t, otherHolderRef(ms, memberID(m)), otherHolder(&v, memberID(m)), "%s: otherHolder(%d)", what, memberID(m))
	}
	if v.many == nil {
		require.LessOrEqual(t, len(want), 1, what)
		return
	}
	std, rest := v.split(new(memberBuf))
	require.Equal(t, ms, append(slices.Clone(std), rest...), what)
	require.True(t, slices.IsSortedFunc(std, func(a, b uint64) int { return int(memberID(a)) - int(memberID(b)) }), what)
	for _, m := range std {
		require.True(t, isStd(m), what)
	}
	for _, m := range rest {
		require.False(t, isStd(m), what)
	}
	narrow := len(std) > 0 && memberID(std[len(std)-1])-memberID(std[0]) < 64
	require.Equal(t, narrow, v.one&hdrNarrow != 0, "%s: narrow", what)
	if narrow {
		var mask uint64
		for _, m := range std {
			mask |= 1 << (memberID(m) - memberID(std[0]))
		}
		require.Equal(t, mask, v.stdMask(), what)
		require.Equal(t, std[0], *v.many, "%s: the first membership follows the mask", what)
	}
	implicit := narrow && len(rest) == 0 && uniform(std)
	require.Equal(t, implicit, v.implicit(), "%s: implicit form", what)
	if implicit {
		require.Len(t, v.arrayWords(), 2, what)
	} else {
		require.Len(t, v.arrayWords(), 1+len(ms), what)
	}
}

func otherHolderRef(ms []uint64, id uint32) uint32 {
	for _, m := range ms {
		if memberID(m) != id && !isSpec(m) {
			return memberID(m)
		}
	}
	return 0
}

// TestMemberArrayFormsAgainstReference adds, replaces and removes random
// memberships of a few keys in random order — holders joining and leaving
// (the lowest ID, which the implicit form's first membership names, too),
// turning non-standard (CPU tier, another group, GPU counted twice,
// speculative) and back, their IDs spanning fewer or more than 64 — through
// with, withBuf and the block map (with rebuilds moving the arrays), and
// checks every value against a plain map of key → memberships: every
// reader, the form taken (implicit exactly when it qualifies), the arena
// words and the accounting of garbage.
func TestMemberArrayFormsAgainstReference(t *testing.T) {
	for _, base := range []uint32{1, 5000, maxEndpointID - 80} {
		t.Run(fmt.Sprintf("base=%d", base), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(base), 3))
			m := newBlockMap(11)
			ref := map[Key]map[uint32]uint64{}
			keys := make([]Key, 24)
			for i := range keys {
				keys[i] = Key(uint64(i+1)*0x9E3779B97F4A7C15 | 1)
			}
			// Each key has a few possible holders, their IDs within 64 of
			// base or (one key in four) up to 80 above, and a usual shape
			// of membership (GPU only, ungrouped or in group 0).
			pool := make([][]uint32, len(keys))
			usual := make([]uint64, len(keys))
			for i := range pool {
				span := 64
				if i%4 == 0 {
					span = 80
				}
				for range 2 + rng.IntN(7) {
					pool[i] = append(pool[i], base+uint32(rng.IntN(span)))
				}
				usual[i] = stdPattern << 24
				if i%2 == 0 {
					usual[i] = 1<<tierShift | 1<<groupShift // GPU, group 0
				}
			}
			var buf []uint64
			implicitSeen, narrowFull := 0, 0
			for op := 0; op < 20_000; op++ {
				ki := rng.IntN(len(keys))
				k := keys[ki]
				id := pool[ki][rng.IntN(len(pool[ki]))]
				var mem uint64
				switch r := rng.IntN(8); {
				case r < 3:
				case r < 6:
					mem = uint64(id) | usual[ki]
				default:
					mem = refMembership(rng, id)
				}
				what := fmt.Sprintf("op %d: key %x, id %d → %x", op, k, id, mem)
				inBuf := rng.IntN(2) == 0
				v, ok := setMembership(m, ref, k, id, mem, func(v *blockVal, idx int) blockVal {
					if inBuf {
						return v.withBuf(idx, mem, &buf)
					}
					return v.with(idx, mem)
				})
				require.Equal(t, len(ref[k]) > 0, ok, what)
				checkBlockVal(t, v, ref[k], []uint32{base - 1, base, base + 63, base + 64, id}, what)
				if v.implicit() {
					implicitSeen++
				} else if v.many != nil && v.one&hdrNarrow != 0 && v.one>>hdrStdShift&hdrStdMask == uint64(uint32(v.one)) {
					narrowFull++ // standard only with an exact mask, but not uniform
				}
				if op%1000 == 999 {
					checkArenaAccounting(t, m)
					n := 0
					m.Range(func(k Key, v blockVal) bool {
						checkBlockVal(t, v, ref[k], nil, fmt.Sprintf("range after op %d, key %x", op, k))
						n++
						return true
					})
					live := 0
					for _, r := range ref {
						if len(r) > 0 {
							live++
						}
					}
					require.Equal(t, live, n)
				}
			}
			t.Logf("implicit %d, standard-only full %d of 20,000 values", implicitSeen, narrowFull)
			require.Greater(t, implicitSeen, 1000)
			require.Greater(t, narrowFull, 300)
		})
	}
}

// checkArenaAccounting checks every shard's arena bookkeeping: the words
// allocated are the live arrays' words plus the garbage.
func checkArenaAccounting(t *testing.T, m *blockMap) {
	t.Helper()
	for i := range m.shards {
		tb := m.shards[i].tab.Load()
		live := 0
		for _, s := range tb.slots {
			if s.val != 0 && s.val != tombVal && isHandle(s.val) {
				live += tb.arrayWords(s.val)
			}
		}
		require.Equal(t, tb.used, live+tb.garbage, "shard %d", i)
	}
}

// TestImplicitArrayEdges walks one block through the implicit form's edges:
// built in every order of four holders, the lowest holder leaving, a holder
// 63 and then 64 IDs above the lowest, a holder turning non-standard or
// joining another group, and back to two and one holder.
func TestImplicitArrayEdges(t *testing.T) {
	std := func(id uint32) uint64 { return uint64(id) | stdPattern<<24 }
	set := func(v blockVal, id uint32, m uint64) blockVal {
		_, idx := v.find(id)
		return v.with(idx, m)
	}
	ids := []uint32{10, 11, 40, 73}
	perm := []int{0, 1, 2, 3}
	for range 24 {
		var v blockVal
		want := map[uint32]uint64{}
		for _, i := range perm {
			v = set(v, ids[i], std(ids[i]))
			want[ids[i]] = std(ids[i])
			checkBlockVal(t, v, want, []uint32{9, 12, 74}, fmt.Sprint(perm))
		}
		require.True(t, v.implicit(), "%v", perm)
		nextPerm(perm)
	}
	var v blockVal
	want := map[uint32]uint64{}
	step := func(id uint32, m uint64, implicit bool, what string) {
		t.Helper()
		v = set(v, id, m)
		if m == 0 {
			delete(want, id)
		} else {
			want[id] = m
		}
		checkBlockVal(t, v, want, []uint32{1, 9, 10, 11, 40, 73, 74, 75}, what)
		require.Equal(t, implicit, v.implicit(), what)
	}
	step(10, std(10), false, "one holder: inline")
	step(40, std(40), true, "two")
	step(73, std(73), true, "73 is 63 above 10")
	step(74, std(74), false, "74 is 64 above 10: the mask is inexact")
	step(10, 0, true, "the lowest leaves: exact again from 40")
	step(10, std(10), false, "back")
	step(74, 0, true, "74 leaves")
	cpu, _ := encodePairs(40, []pair{{tier: 0, group: -1, count: 1}, {tier: 1, group: -1, count: 1}})
	step(40, cpu, false, "40 also on CPU")
	step(40, std(40), true, "40 on GPU only again")
	g1, _ := encodePairs(40, []pair{{tier: 0, group: 1, count: 1}})
	step(40, g1, false, "40 in another group: standard, not uniform")
	step(40, makeSpec(40, 99), false, "40 speculative")
	step(40, std(40), true, "40 confirmed")
	c2, _ := encodePairs(10, []pair{{tier: 0, group: -1, count: 2}})
	step(10, c2, false, "10 counted twice (complex)")
	step(10, std(10), true, "10 counted once")
	step(73, 0, true, "two left")
	step(10, 0, false, "one left: inline")
	require.Equal(t, std(40), v.one)
	step(40, 0, false, "none")
	require.Equal(t, blockVal{}, v)
	// The other of two, whichever leaves.
	for _, leave := range []uint32{10, 40} {
		v = blockVal{}
		v = set(set(v, 10, std(10)), 40, std(40))
		require.True(t, v.implicit())
		v = set(v, leave, 0)
		require.Nil(t, v.many)
		require.Equal(t, std(50-leave), v.one)
	}
}

// nextPerm advances p to the next permutation in lexicographic order
// (wrapping around).
func nextPerm(p []int) {
	i := len(p) - 2
	for i >= 0 && p[i] >= p[i+1] {
		i--
	}
	if i >= 0 {
		j := len(p) - 1
		for p[j] <= p[i] {
			j--
		}
		p[i], p[j] = p[j], p[i]
	}
	slices.Reverse(p[i+1:])
}

// FuzzMemberArrays applies the operations a byte string encodes — per
// three bytes: a key (of four), an endpoint ID offset (0 … 79 above a base
// chosen by the first byte) and a membership shape (or removal) — through
// the block map and checks every value against a plain map after each.
func FuzzMemberArrays(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 0, 5, 1, 0, 40, 1, 0, 63, 1, 0, 64, 0, 0, 0, 9})
	f.Add([]byte{2, 1, 3, 2, 1, 4, 2, 1, 5, 2, 1, 6, 3, 1, 7, 1, 1, 8})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 || len(ops) > 3*400 {
			return
		}
		base := []uint32{1, 1000, maxEndpointID - 80}[ops[0]%3]
		m := newBlockMap(1)
		ref := map[Key]map[uint32]uint64{}
		var buf []uint64
		for i := 1; i+3 <= len(ops); i += 3 {
			k := Key(uint64(ops[i]%4+1) * 0x9E3779B97F4A7C15)
			id := base + uint32(ops[i+1]%80)
			var mem uint64
			switch shape := ops[i+2] % 10; shape {
			case 0, 1:
			case 2, 3, 4:
				mem = uint64(id) | stdPattern<<24
			case 5, 6:
				mem = uint64(id) | 1<<tierShift | 1<<groupShift
			case 7:
				mem = uint64(id) | 3<<tierShift | 1<<groupShift
			case 8:
				mem, _ = encodePairs(id, []pair{{tier: 0, group: 0, count: 2}})
			default:
				mem = makeSpec(id, uint64(ops[i+2]))
			}
			v, ok := setMembership(m, ref, k, id, mem, func(v *blockVal, idx int) blockVal {
				return v.withBuf(idx, mem, &buf)
			})
			if ok != (len(ref[k]) > 0) {
				t.Fatalf("op %d: loaded %v with %d memberships", i/3, ok, len(ref[k]))
			}
			checkBlockVal(t, v, ref[k], []uint32{base, base + 63, base + 64, id}, fmt.Sprintf("op %d", i/3))
		}
		checkArenaAccounting(t, m)
	})
}

// setMembership sets endpoint id's membership of block k to mem (0 removes
// it), in m through build (given k's value and id's position in it) and in
// the reference ref, and returns m's value of k afterwards.
func setMembership(m *blockMap, ref map[Key]map[uint32]uint64, k Key, id uint32, mem uint64, build func(v *blockVal, idx int) blockVal) (blockVal, bool) {
	m.Compute(k, func(v blockVal, _ bool) (blockVal, bool) {
		_, idx := v.find(id)
		nv := build(&v, idx)
		return nv, nv.count() == 0
	})
	if ref[k] == nil {
		ref[k] = map[uint32]uint64{}
	}
	if mem == 0 {
		delete(ref[k], id)
	} else {
		ref[k][id] = mem
	}
	return m.Load(k)
}
