package jsonids

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// listAgrees checks List on in, from its first byte, against encoding/json
// on the array List read (up to the first ']'): the same IDs when both
// accept (a null element aside, which List refuses); compact exactly when
// the bytes are Append's; an error naming an ID within the array.
func listAgrees(t *testing.T, in []byte) {
	t.Helper()
	ids, next, compact, err := List([]uint32{7}, in, 0)
	end := bytes.IndexByte(in, ']')
	if len(in) == 0 || in[0] != '[' || end < 0 {
		var le *ListError
		require.True(t, errors.As(err, &le), "%q: %v", in, err)
		require.Negative(t, le.Index)
		return
	}
	var want []uint32
	jerr := json.Unmarshal(in[:end+1], &want)
	if err != nil {
		var le *ListError
		require.True(t, errors.As(err, &le), "%q: %v", in, err)
		require.GreaterOrEqual(t, le.Index, 0, "%q", in)
		// The bad ID is the one after those read, or the last read when
		// what follows it is not ',' or ']'.
		read := len(ids) - 1
		require.Contains(t, []int{read, read - 1}, le.Index, "%q", in)
		if jerr == nil {
			var ptrs []*uint32
			require.NoError(t, json.Unmarshal(in[:end+1], &ptrs))
			require.Contains(t, ptrs, (*uint32)(nil), "List(%q) refused a list of IDs: %v", in, err)
		}
		return
	}
	require.NoError(t, jerr, "%q: List accepted what encoding/json refuses", in)
	require.Equal(t, end+1, next)
	require.Equal(t, uint32(7), ids[0], "appended after dst")
	require.Equal(t, want, ids[1:], "%q", in)
	require.Equal(t, bytes.Equal(Append(nil, want), in[:end+1]), compact, "%q: compact", in)
}

var listSeeds = []string{
	`[]`, `[ ]`, `[0]`, `[1,2,3]`, "[ 1 ,\n2\t,\r3 ]", `[4294967295]`, `[4294967296]`, `[99999999999]`, `[12345678,123456789]`,
	`[1234567890,1]`, `[00000001]`, `[01234567]`, `[-1]`, `[1.0]`, `[1e2]`, `[1,]`, `[,1]`, `[1 2]`, `[1`, `[`, `]`, ``,
	`[null]`, `[1,null]`, `[[1]]`, `[151935,0,42,7,99999,100000]`, `[1]x`, `[ 1]`, `[1 ]`, "[1,\x80]", `[123456,`,
}

func TestListMatchesEncodingJSON(t *testing.T) {
	for _, s := range listSeeds {
		listAgrees(t, []byte(s))
	}
	ids := make([]uint32, 3000)
	for i := range ids {
		ids[i] = uint32(i * 1_431_655) // every length from 1 to 10 digits
	}
	listAgrees(t, Append(nil, ids))
}

// List grows dst once, to exactly the array's length.
func TestListGrowsOnce(t *testing.T) {
	in := Append(nil, make([]uint32, 2000))
	allocs := testing.AllocsPerRun(20, func() { _, _, _, _ = List(nil, in, 0) })
	require.Equal(t, 1.0, allocs)
	dst := make([]uint32, 0, 2000)
	allocs = testing.AllocsPerRun(20, func() { _, _, _, _ = List(dst, in, 0) })
	require.Zero(t, allocs)
}

func FuzzListMatchesEncodingJSON(f *testing.F) {
	for _, s := range listSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { listAgrees(t, in) })
}
