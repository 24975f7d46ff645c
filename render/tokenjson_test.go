package render

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// AppendTokenJSON writes what encoding/json writes for the prompt's IDs,
// whether the renderer sent them compact (its bytes are copied), with
// whitespace (the IDs are written afresh), or the prompt was built by hand;
// and once TokenIDs is replaced, the renderer's bytes are no longer used.
func TestAppendTokenJSONMatchesEncodingJSON(t *testing.T) {
	check := func(p *Prompt, raw bool) {
		t.Helper()
		want, err := json.Marshal(p.TokenIDs)
		require.NoError(t, err)
		require.Equal(t, string(want), string(p.AppendTokenJSON(nil)))
		require.Equal(t, `{"prompt":`+string(want), string(p.AppendTokenJSON([]byte(`{"prompt":`))))
		require.Equal(t, len(want), p.TokenJSONLen())
		require.Equal(t, raw, p.rawTokens() != nil)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var res Result
	for i := range 300 {
		ids := make([]uint32, 1+rng.IntN(40))
		for k := range ids {
			ids[k] = rng.Uint32() >> rng.IntN(32)
		}
		ids[0] = []uint32{0, 9, 10, math.MaxUint32}[i%4]
		compact, _ := json.Marshal(ids)
		spaced, _ := json.MarshalIndent(ids, "", " ")
		for _, arr := range []string{string(compact), string(spaced), "[ " + string(compact[1:])} {
			body := `[{"request_id":"r","token_ids":` + arr + `,"cache_salt":null},{"token_ids":` + arr + `}]`
			// Into the same Result each time: the reused buffers must not leak
			// an earlier answer's bytes.
			require.NoError(t, decodeResponse([]byte(body), true, math.MaxInt, true, &res))
			require.Len(t, res.Prompts, 2)
			require.Equal(t, ids, res.Prompts[0].TokenIDs)
			check(&res.Prompts[0], arr == string(compact))
			check(&res.Prompts[1], arr == string(compact))
		}
	}
	check(&Prompt{TokenIDs: []uint32{1, 20, 300}}, false)

	require.NoError(t, decodeResponse([]byte(`[{"token_ids":[5,6,7]}]`), true, math.MaxInt, true, &res))
	p := res.Prompts[0]
	check(&p, true)
	p.TokenIDs = []uint32{8, 9, 10}
	check(&p, false)
	p.TokenIDs = res.Prompts[0].TokenIDs[:2]
	check(&p, false)

	// Not asked for (Request.KeepTokenJSON off): the IDs are written afresh.
	require.NoError(t, decodeResponse([]byte(`[{"token_ids":[5,6,7]}]`), true, math.MaxInt, false, &res))
	check(&res.Prompts[0], false)
}

// A Result rendered into again reuses the renderer bytes' buffer as it
// reuses the token array.
func TestDecodeReusesTokenJSONBufferAllocations(t *testing.T) {
	ids := make([]uint32, 2000)
	for i := range ids {
		ids[i] = uint32(i * 7919 % 150000)
	}
	arr, _ := json.Marshal(ids)
	body := []byte(`[{"request_id":"r","token_ids":` + string(arr) + `}]`)
	var res Result
	require.NoError(t, decodeResponse(body, true, math.MaxInt, true, &res))
	allocs := testing.AllocsPerRun(20, func() { _ = decodeResponse(body, true, math.MaxInt, true, &res) })
	// The one allocation is the scanner (as TestRenderIntoReusesTheTokenArrays
	// finds), neither the token array nor the bytes beside it.
	require.LessOrEqual(t, allocs, 1.0)
	require.Equal(t, string(arr), string(res.Prompts[0].AppendTokenJSON(nil)))
}
