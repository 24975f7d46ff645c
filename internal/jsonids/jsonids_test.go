package jsonids

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Append writes what encoding/json writes for the same []uint32, at every
// digit count and at the uint32 bounds, after any prefix.
func TestAppendMatchesEncodingJSON(t *testing.T) {
	cases := [][]uint32{
		{}, {0}, {7}, {10}, {99}, {100}, {math.MaxUint32},
		{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 9999, 10000, 99999, 100000, 999999, 1000000,
			9999999, 10000000, 99999999, 100000000, 999999999, 1000000000, math.MaxUint32 - 1, math.MaxUint32},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		ids := make([]uint32, rng.IntN(50))
		for i := range ids {
			ids[i] = rng.Uint32() >> rng.IntN(32)
		}
		cases = append(cases, ids)
	}
	for _, ids := range cases {
		want, err := json.Marshal(ids)
		require.NoError(t, err)
		require.Equal(t, string(want), string(Append(nil, ids)), "%v", ids)
		require.Equal(t, len(want), Len(ids))
		require.Equal(t, `{"p":`+string(want), string(Append([]byte(`{"p":`), ids)))
	}
}

// Append grows its destination once, to the exact size, and not at all
// when it has room.
func TestAppendAllocatesOnceExactly(t *testing.T) {
	ids := make([]uint32, 2000)
	for i := range ids {
		ids[i] = uint32(i * 53)
	}
	var out []byte
	allocs := testing.AllocsPerRun(20, func() { out = Append(nil, ids) })
	require.Equal(t, 1.0, allocs)
	require.Equal(t, len(out), cap(out))
	buf := make([]byte, 0, Len(ids))
	allocs = testing.AllocsPerRun(20, func() { out = Append(buf[:0], ids) })
	require.Zero(t, allocs)
}

func FuzzAppendMatchesEncodingJSON(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 255, 255, 255, 255, 1, 2, 3})
	f.Fuzz(func(t *testing.T, raw []byte) {
		ids := make([]uint32, len(raw)/4)
		for i := range ids {
			ids[i] = uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24
		}
		want, err := json.Marshal(ids)
		if err != nil {
			t.Fatal(err)
		}
		if got := Append(nil, ids); string(got) != string(want) {
			t.Fatalf("Append(%v) = %s, want %s", ids, got, want)
		}
	})
}

// BenchmarkAppend writes 2,000 token IDs against encoding/json (the floor
// it replaces), reporting the ratio.
func BenchmarkAppend(b *testing.B) {
	ids := make([]uint32, 2000)
	for i := range ids {
		ids[i] = 100 + uint32(i*7919)%100000
	}
	want, _ := json.Marshal(ids)
	buf := make([]byte, 0, len(want))
	b.ReportAllocs()
	b.SetBytes(int64(len(want)))
	for b.Loop() {
		buf = Append(buf[:0], ids)
	}
	if string(buf) != string(want) {
		b.Fatal("Append differs from encoding/json")
	}
}
