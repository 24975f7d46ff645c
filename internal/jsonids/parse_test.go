package jsonids

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// parseAgrees checks that Parse accepts in exactly when encoding/json
// decodes it into a []uint32, with the same IDs, but for a null element,
// which encoding/json reads as 0 and Parse refuses.
func parseAgrees(t *testing.T, in []byte) {
	t.Helper()
	got, err := Parse(in)
	var want []uint32
	jerr := json.Unmarshal(in, &want)
	if jerr == nil && err != nil {
		var ptrs []*uint32
		require.NoError(t, json.Unmarshal(in, &ptrs))
		require.Contains(t, ptrs, (*uint32)(nil), "Parse(%q) refused a list of IDs: %v", in, err)
		return
	}
	if (err == nil) != (jerr == nil) {
		t.Fatalf("Parse(%q): err %v, encoding/json: %v", in, err, jerr)
	}
	if err == nil {
		require.Equal(t, want, got, "%q", in)
		require.Equal(t, want == nil, got == nil, "%q: nil-ness", in)
	}
}

var parseSeeds = []string{
	`[]`, ` [ ] `, `null`, ` null `, `[0]`, `[1,2,3]`, "[ 1 ,\n2\t,\r3 ]", `[4294967295]`, `[4294967296]`, `[99999999999]`,
	`[-1]`, `[-0]`, `[01]`, `[1.0]`, `[1e2]`, `[1,]`, `[,1]`, `[1 2]`, `[1`, `[`, `]`, ``, ` `, `1`, `"1"`, `["1"]`,
	`[null]`, `[1,null]`, `[true]`, `[[1]]`, `{}`, `[1]x`, `[1] ]`, `nul`, `nullx`, `[1]]`, `[]]`, `[0,00]`,
}

func TestParseMatchesEncodingJSON(t *testing.T) {
	for _, in := range parseSeeds {
		parseAgrees(t, []byte(in))
	}
}

// Parse allocates the slice once, sized exactly for a list of IDs.
func TestParseAllocatesOnce(t *testing.T) {
	in := Append(nil, make([]uint32, 2000))
	var ids []uint32
	allocs := testing.AllocsPerRun(20, func() { ids, _ = Parse(in) })
	require.Equal(t, 1.0, allocs)
	require.Equal(t, 2000, cap(ids))
}

func FuzzParseMatchesEncodingJSON(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { parseAgrees(t, in) })
}
