package sim

import (
	"bytes"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/simengine"
)

// traceConfig is a small fleet replaying a generated trace.
func traceConfig(t *testing.T, raw []byte, load float64) Config {
	t.Helper()
	td, err := ReadMooncakeTrace(bytes.NewReader(raw), "gen.jsonl", TraceWindow{})
	require.NoError(t, err)
	cfg := DefaultConfig(SharedPrefix, load)
	cfg.Fleet.Engines = 2
	cfg.Workload = TraceWorkload(td)
	return cfg
}

// TestTracePrompts: a request's prompt is its hash IDs' 512-token blocks
// cut to input_length, equal IDs giving equal blocks wherever they appear
// and different IDs different ones.
func TestTracePrompts(t *testing.T) {
	d := &TraceData{Requests: []TraceRequest{
		{InputLength: 1100, OutputLength: 1, HashIDs: []int64{7, 8, 9}},
		{InputLength: 1024, OutputLength: 1, HashIDs: []int64{7, 8}},
		{InputLength: 700, OutputLength: 1, HashIDs: []int64{8, 7}},
	}}
	a, b, c := tracePrompt(d, 0), tracePrompt(d, 1), tracePrompt(d, 2)
	require.Len(t, a, 1100)
	require.Len(t, b, 1024)
	require.Len(t, c, 700)
	require.Equal(t, a[:1024], b, "a shared prefix of hash IDs is a shared prefix of tokens")
	require.Equal(t, a[512:1024], c[:512], "hash ID 8's block is the same in any position")
	require.Equal(t, a[:188], c[512:700], "the partial last block is the start of hash ID 7's block")
	require.NotEqual(t, a[:512], a[512:1024], "different IDs, different blocks")
	for _, tok := range a {
		require.True(t, tok >= tokenLow && tok < tokenHigh)
	}
	require.Equal(t, a, tracePrompt(d, 0), "deterministic")
}

// TestTraceArrivals: arrivals keep the trace's spacing, scaled so that the
// window's mean rate is the run's rate.
func TestTraceArrivals(t *testing.T) {
	d := &TraceData{Requests: []TraceRequest{
		{Timestamp: 1000}, {Timestamp: 1000}, {Timestamp: 3000}, {Timestamp: 5000},
	}}
	for i := range d.Requests {
		d.Requests[i].OutputLength = i + 1
	}
	// Natively 3 gaps in 4 s; at 1.5 requests/s the span becomes 2 s.
	as := traceArrivals(d, 1.5, simengine.DefaultStart)
	var offs []time.Duration
	for i, a := range as {
		offs = append(offs, a.at.Sub(simengine.DefaultStart))
		require.Equal(t, i, a.trace)
		require.Equal(t, i+1, a.outputTokens)
		require.Nil(t, a.prompt, "built on arrival")
	}
	require.Equal(t, []time.Duration{0, 0, time.Second, 2 * time.Second}, offs)
}

// TestTraceRun replays a generated trace with every policy: every request
// completes, the shared prefixes are reused, and the bound sees them.
func TestTraceRun(t *testing.T) {
	cfg := traceConfig(t, genMooncake(40, 3, 200, 2), 0.5)
	require.NoError(t, cfg.Validate())
	for _, p := range AllPolicies {
		res, err := Run(cfg, p)
		require.NoError(t, err, p)
		require.Equal(t, 40, res.Completed, p)
		require.Positive(t, res.BoundHitRate, p)
		if p == KVRoute {
			require.Positive(t, res.HitRate)
		}
	}
}

// TestTraceOutputLengths: each request generates its own output_length.
// Two requests far apart, the second with a 200-token answer: the run lasts
// about 199 more decode steps than with a 1-token answer.
func TestTraceOutputLengths(t *testing.T) {
	line := func(ts, out int) string {
		return `{"timestamp": ` + strconv.Itoa(ts) + `, "input_length": 600, "output_length": ` + strconv.Itoa(out) + `, "hash_ids": [1, 2]}` + "\n"
	}
	short := traceConfig(t, []byte(line(0, 1)+line(60000, 1)), 0.01)
	long := traceConfig(t, []byte(line(0, 1)+line(60000, 200)), 0.01)
	a, err := Run(short, RoundRobin)
	require.NoError(t, err)
	b, err := Run(long, RoundRobin)
	require.NoError(t, err)
	require.GreaterOrEqual(t, b.Makespan-a.Makespan, 199*short.Fleet.DecodeStep)
}

// TestTraceValidate: a request too long for one engine, or a window
// without two distinct timestamps, is a configuration error naming it.
func TestTraceValidate(t *testing.T) {
	cfg := traceConfig(t, genMooncake(10, 2, 100, 3), 1)
	require.NoError(t, cfg.Validate())
	c := cfg
	c.Fleet.NumGPUBlocks = 20
	require.ErrorIs(t, c.Validate(), ErrInvalidConfig)
	require.ErrorContains(t, c.Validate(), "(line 1) needs")
	c = cfg
	c.Workload.Requests = 3
	require.ErrorIs(t, c.Validate(), ErrInvalidConfig)
	c = cfg
	d := *cfg.Workload.Trace
	d.Requests = slices.Clone(d.Requests[:2])
	d.Requests[1].Timestamp = d.Requests[0].Timestamp
	c.Workload = TraceWorkload(&d)
	require.ErrorContains(t, c.Validate(), "two distinct timestamps")
	c.Workload.Trace = nil
	require.ErrorIs(t, c.Validate(), ErrInvalidConfig)
}
