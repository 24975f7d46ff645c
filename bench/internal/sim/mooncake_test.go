package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// genMooncake writes a small trace in the Mooncake format: n requests over
// groups shared prefixes (each a run of hash IDs), every request its
// group's prefix plus one or two hash IDs of its own and a partial last
// block, with exponential gaps of mean gapMs between timestamps. The
// simulation's tests replay it (they never read a real trace).
func genMooncake(n, groups int, gapMs float64, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x6d))
	next := int64(0)
	prefixes := make([][]int64, groups)
	for g := range prefixes {
		for range 2 + rng.IntN(4) {
			prefixes[g] = append(prefixes[g], next)
			next++
		}
	}
	var b bytes.Buffer
	ts := 0.0
	for range n {
		ids := append([]int64(nil), prefixes[rng.IntN(groups)]...)
		for range 1 + rng.IntN(2) {
			ids = append(ids, next)
			next++
		}
		in := (len(ids)-1)*MooncakeBlockTokens + 1 + rng.IntN(MooncakeBlockTokens)
		line, _ := json.Marshal(TraceRequest{Timestamp: int64(ts), InputLength: in, OutputLength: 1 + rng.IntN(64), HashIDs: ids})
		b.Write(line)
		b.WriteByte('\n')
		ts += rng.ExpFloat64() * gapMs
	}
	return b.Bytes()
}

func TestReadMooncakeTrace(t *testing.T) {
	raw := genMooncake(50, 4, 100, 1)
	td, err := ReadMooncakeTrace(bytes.NewReader(raw), "gen.jsonl", TraceWindow{})
	require.NoError(t, err)
	require.Equal(t, 50, td.Total)
	require.Len(t, td.Requests, 50)
	require.Equal(t, TraceWindow{Start: 0, Count: 50}, td.Window)
	first := strings.SplitN(string(raw), "\n", 2)[0]
	var want TraceRequest
	require.NoError(t, json.Unmarshal([]byte(first), &want))
	require.Equal(t, want, td.Requests[0])

	// A window keeps a contiguous run and still checks every line.
	w, err := ReadMooncakeTrace(bytes.NewReader(raw), "gen.jsonl", TraceWindow{Start: 10, Count: 5})
	require.NoError(t, err)
	require.Equal(t, td.Requests[10:15], w.Requests)
	require.Equal(t, 50, w.Total)
	bad := append(append([]byte(nil), raw...), "{}\n"...)
	_, err = ReadMooncakeTrace(bytes.NewReader(bad), "gen.jsonl", TraceWindow{Start: 0, Count: 1})
	require.ErrorContains(t, err, "line 51: missing key")
	// A window running past the end keeps what there is; one past it is an error.
	w, err = ReadMooncakeTrace(bytes.NewReader(raw), "gen.jsonl", TraceWindow{Start: 45, Count: 10})
	require.NoError(t, err)
	require.Len(t, w.Requests, 5)
	require.Equal(t, 5, w.Window.Count)
	_, err = ReadMooncakeTrace(bytes.NewReader(raw), "gen.jsonl", TraceWindow{Start: 50})
	require.ErrorIs(t, err, ErrTrace)
	_, err = ReadMooncakeTrace(bytes.NewReader(raw), "gen.jsonl", TraceWindow{Start: -1})
	require.ErrorIs(t, err, ErrTrace)

	s := td.Stats()
	require.Equal(t, 50, s.Requests)
	require.Positive(t, s.DistinctBlocks)
	require.Equal(t, int64(s.DistinctBlocks)*MooncakeBlockTokens, s.WorkingSetTokens)
	require.Equal(t, td.Requests[49].Timestamp-td.Requests[0].Timestamp, s.Span.Milliseconds())
}

// TestReadMooncakeTraceErrors: every kind of bad line is an error that
// names its line and says what is wrong.
func TestReadMooncakeTraceErrors(t *testing.T) {
	good := `{"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}`
	long := `{"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [1, 2` + strings.Repeat(", 3", MaxTraceLineBytes/3) + `]}`
	for name, tc := range map[string]struct{ line, want string }{
		"empty line":          {"", "line 2: empty line"},
		"not an object":       {`[1, 2]`, "line 2: want a JSON object"},
		"unknown key":         {`{"timestamp": 5, "input_len": 600}`, `line 2: unknown key "input_len"`},
		"key twice":           {`{"timestamp": 5, "timestamp": 6}`, `line 2: key "timestamp" given twice`},
		"missing key":         {`{"timestamp": 5, "input_length": 600, "output_length": 3}`, `line 2: missing key "hash_ids"`},
		"float":               {`{"timestamp": 5.5, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}`, "line 2: timestamp: want an integer in [0,"},
		"exponent":            {`{"timestamp": 5, "input_length": 6e2, "output_length": 3, "hash_ids": [1, 2]}`, "line 2: input_length: want an integer"},
		"negative":            {`{"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [1, -2]}`, "line 2: hash_ids: want an integer"},
		"string":              {`{"timestamp": "5", "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}`, "line 2: timestamp: want an integer, got a string"},
		"null":                {`{"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": null}`, "line 2: want hash_ids: an array, got null"},
		"too many tokens":     {`{"timestamp": 5, "input_length": 3000000, "output_length": 3, "hash_ids": [1, 2]}`, "line 2: input_length: want an integer in [0, 2097152]"},
		"zero output":         {`{"timestamp": 5, "input_length": 600, "output_length": 0, "hash_ids": [1, 2]}`, "must be at least 1"},
		"too few hash_ids":    {`{"timestamp": 5, "input_length": 1025, "output_length": 3, "hash_ids": [1, 2]}`, "line 2: input_length 1025 needs 3 hash_ids of 512 tokens, got 2"},
		"too many hash_ids":   {`{"timestamp": 5, "input_length": 512, "output_length": 3, "hash_ids": [1, 2]}`, "needs 1 hash_ids of 512 tokens, got 2"},
		"earlier timestamp":   {`{"timestamp": 4, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}`, "line 2: timestamp 4 is before the previous line's 5"},
		"data after":          {good + ` {}`, "line 2: data after the object"},
		"cut short":           {`{"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [1, 2`, "line 2: the line ends inside a JSON value"},
		"syntax":              {`{"timestamp": 5,, "input_length": 600}`, "line 2: invalid JSON"},
		"line too long":       {long, fmt.Sprintf("line 2: longer than %d bytes", MaxTraceLineBytes)},
		"hash_ids not a list": {`{"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": {"a": 1}}`, `want hash_ids: an array, got "{"`},
	} {
		_, err := ReadMooncakeTrace(strings.NewReader(good+"\n"+tc.line+"\n"+good+"\n"), "t.jsonl", TraceWindow{})
		require.ErrorIs(t, err, ErrTrace, name)
		require.ErrorContains(t, err, tc.want, name)
	}
	_, err := ReadMooncakeTrace(strings.NewReader(""), "t.jsonl", TraceWindow{})
	require.ErrorContains(t, err, "no request in the window")
	// The last line needs no newline; a line may end in \r\n.
	td, err := ReadMooncakeTrace(strings.NewReader(good+"\r\n"+good), "t.jsonl", TraceWindow{})
	require.NoError(t, err)
	require.Len(t, td.Requests, 2)
}

// FuzzReadMooncakeTrace: whatever the input, the decoder returns either an
// ErrTrace error or requests that satisfy every rule, and those requests
// encode back to a trace that decodes to the same requests.
func FuzzReadMooncakeTrace(f *testing.F) {
	f.Add(genMooncake(3, 2, 10, 1))
	f.Add([]byte(`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}`))
	f.Add([]byte("{\"timestamp\": 0}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		td, err := ReadMooncakeTrace(bytes.NewReader(data), "fuzz", TraceWindow{})
		if err != nil {
			require.True(t, errors.Is(err, ErrTrace), "%v", err)
			return
		}
		var again bytes.Buffer
		prev := int64(0)
		for _, r := range td.Requests {
			require.GreaterOrEqual(t, r.Timestamp, prev)
			prev = r.Timestamp
			require.GreaterOrEqual(t, r.InputLength, 1)
			require.LessOrEqual(t, r.InputLength, MaxTraceTokens)
			require.GreaterOrEqual(t, r.OutputLength, 1)
			require.Len(t, r.HashIDs, (r.InputLength+MooncakeBlockTokens-1)/MooncakeBlockTokens)
			line, err := json.Marshal(r)
			require.NoError(t, err)
			again.Write(append(line, '\n'))
		}
		back, err := ReadMooncakeTrace(&again, "fuzz", TraceWindow{})
		require.NoError(t, err)
		require.Equal(t, td.Requests, back.Requests)
	})
}
