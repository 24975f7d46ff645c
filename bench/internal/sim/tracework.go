package sim

import (
	"fmt"
	"time"
)

// DefaultTraceBlocks is the per-engine KV cache of a trace run when none is
// given: 7,168 blocks of 64 tokens (458,752 tokens), about what one 80 GB GPU
// holds for an 8B model (128 KiB of KV per token) after the weights. It
// holds the longest request of the public Mooncake traces (about 191,000
// tokens) with room to spare, which the default 1,024-block engine cannot.
const DefaultTraceBlocks = 7168

// TraceStats summarises a trace window for the report.
type TraceStats struct {
	Requests int `json:"requests"`
	// MeanInput and MeanOutput are the mean prompt and answer tokens;
	// MaxInput the longest prompt.
	MeanInput  float64 `json:"meanInput"`
	MeanOutput float64 `json:"meanOutput"`
	MaxInput   int     `json:"maxInput"`
	// Span is the window's duration in the trace's own time (first to last
	// timestamp).
	Span time.Duration `json:"span"`
	// DistinctBlocks is the working set: the distinct hash IDs (512-token
	// blocks) the window's prompts touch; WorkingSetTokens the same in
	// tokens.
	DistinctBlocks   int   `json:"distinctBlocks"`
	WorkingSetTokens int64 `json:"workingSetTokens"`
}

// Stats returns the window's summary.
func (d *TraceData) Stats() TraceStats {
	s := TraceStats{Requests: len(d.Requests)}
	if len(d.Requests) == 0 {
		return s
	}
	ids := map[int64]struct{}{}
	var in, out float64
	for _, r := range d.Requests {
		in += float64(r.InputLength)
		out += float64(r.OutputLength)
		s.MaxInput = max(s.MaxInput, r.InputLength)
		for _, id := range r.HashIDs {
			ids[id] = struct{}{}
		}
	}
	n := float64(len(d.Requests))
	s.MeanInput, s.MeanOutput = in/n, out/n
	s.Span = time.Duration(d.Requests[len(d.Requests)-1].Timestamp-d.Requests[0].Timestamp) * time.Millisecond
	s.DistinctBlocks = len(ids)
	s.WorkingSetTokens = int64(len(ids)) * MooncakeBlockTokens
	return s
}

// TraceWorkload returns the Trace workload of a decoded trace window: its
// requests at the trace's timestamps (scaled to the run's load), its
// prompts derived from the hash IDs and its output lengths.
func TraceWorkload(d *TraceData) Workload {
	w := Workload{Kind: Trace, Trace: d, Requests: len(d.Requests), OutputTokens: 1}
	if len(d.Requests) > 0 {
		w.OutputTokens = max(int(d.Stats().MeanOutput+0.5), 1)
	}
	return w
}

// validateTrace checks a Trace workload against the fleet.
func (c Config) validateTrace() error {
	d := c.Workload.Trace
	switch {
	case d == nil || len(d.Requests) == 0:
		return fmt.Errorf("%w: the trace workload has no requests", ErrInvalidConfig)
	case len(d.Requests) != c.Workload.Requests:
		return fmt.Errorf("%w: workload.requests %d is not the trace window's %d", ErrInvalidConfig, c.Workload.Requests, len(d.Requests))
	case len(d.Requests) < 2 || d.Requests[len(d.Requests)-1].Timestamp == d.Requests[0].Timestamp:
		return fmt.Errorf("%w: a trace window needs two distinct timestamps to scale its arrivals to a load", ErrInvalidConfig)
	}
	bs := c.Fleet.BlockSize
	for i, r := range d.Requests {
		if need := (r.InputLength + r.OutputLength + bs - 1) / bs; need > c.Fleet.NumGPUBlocks {
			return fmt.Errorf("%w: trace request %d (line %d) needs %d blocks of %d tokens for %d+%d tokens, more than an engine's %d (raise -blocks or skip it with a window)",
				ErrInvalidConfig, i, d.Window.Start+i+1, need, bs, r.InputLength, r.OutputLength, c.Fleet.NumGPUBlocks)
		}
	}
	return nil
}

// traceArrivals schedules a trace window: request i arrives at start +
// (timestamp_i − timestamp_0) × scale, where scale makes the window's mean
// rate rate requests per second; its prompt is built when it arrives
// (tracePrompt), not here, so that a run holds only the prompts in flight.
func traceArrivals(d *TraceData, rate float64, start time.Time) []arrival {
	rs := d.Requests
	t0 := rs[0].Timestamp
	span := float64(rs[len(rs)-1].Timestamp-t0) / 1000 // seconds
	native := float64(len(rs)-1) / span
	scale := native / rate
	out := make([]arrival, len(rs))
	for i, r := range rs {
		off := time.Duration(float64(r.Timestamp-t0) * scale * float64(time.Millisecond))
		out[i] = arrival{at: start.Add(off), session: -1, trace: i, outputTokens: r.OutputLength}
	}
	return out
}

// tracePrompt builds request i's prompt: each hash ID's 512 tokens in
// order (traceBlockTokens), cut to input_length.
func tracePrompt(d *TraceData, i int) []uint32 {
	r := d.Requests[i]
	p := make([]uint32, 0, len(r.HashIDs)*MooncakeBlockTokens)
	for _, id := range r.HashIDs {
		p = appendTraceBlock(p, id)
	}
	return p[:r.InputLength]
}

// appendTraceBlock appends the 512 tokens that hash ID id stands for: a
// pure function of id (a SplitMix64 stream keyed by it), so that equal hash
// IDs give equal token blocks in every request and every run, whatever the
// engines' block size, and different IDs different blocks.
func appendTraceBlock(dst []uint32, id int64) []uint32 {
	key := splitmix64(uint64(id) ^ 0x6d6f6f6e63616b65) // "mooncake"
	for j := range uint64(MooncakeBlockTokens) {
		x := splitmix64(key + j*0x9e3779b97f4a7c15)
		dst = append(dst, tokenLow+uint32(x%(tokenHigh-tokenLow)))
	}
	return dst
}

// splitmix64 is SplitMix64's output function.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// describeTrace is the report's one-line description of a trace window.
func describeTrace(d *TraceData) string {
	s := d.Stats()
	window := fmt.Sprintf("all %s requests", thousands(d.Total))
	if s.Requests < d.Total {
		window = fmt.Sprintf("requests %s–%s of %s (a contiguous window)", thousands(d.Window.Start+1), thousands(d.Window.Start+s.Requests), thousands(d.Total))
	}
	return fmt.Sprintf("Mooncake trace %s, %s, %s of trace time; prompts %s tokens on average (longest %s), answers %.0f tokens on average (each request its own output_length); arrivals at the trace's timestamps, scaled to the load; working set %s distinct 512-token blocks (%s tokens).",
		d.Source, window, s.Span.Round(time.Second), thousands(int(s.MeanInput+0.5)), thousands(s.MaxInput), s.MeanOutput,
		thousands(s.DistinctBlocks), thousands(int(s.WorkingSetTokens)))
}

// TracePreamble states a trace run's fleet against its working set, for
// Meta.Preamble.
func TracePreamble(cfg Config) string {
	d := cfg.Workload.Trace
	s := d.Stats()
	fleet := int64(cfg.CacheBlocks()) * int64(cfg.Fleet.BlockSize)
	return fmt.Sprintf("**Trace replay:** %s The fleet's KV cache is %d engines × %s blocks × %d tokens = %s tokens, so the window's working set is %.1f× the fleet's cache; each request's prompt is its hash IDs' token blocks (512 deterministic tokens per hash ID, equal IDs giving equal blocks) cut to its input_length.",
		describeTrace(d), cfg.Fleet.Engines, thousands(cfg.Fleet.NumGPUBlocks), cfg.Fleet.BlockSize, thousands(int(fleet)), float64(s.WorkingSetTokens)/float64(fleet))
}
