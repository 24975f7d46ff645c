package disagg

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
)

// costConfig is a cost-rule configuration with round numbers: 10,000
// prefill tokens/s, 100,000 transfer tokens/s, 1 ms per transfer, no stall
// priced.
func costConfig() Config {
	return Config{NonCachedTokens: 1000, CostRule: true, PrefillTokensPerSecond: 10_000,
		TransferTokensPerSecond: 100_000, TransferLatency: time.Millisecond, DecodeStallWeight: -1}
}

// The estimates are the documented sums: queue and uncached tokens at the
// prefill throughput, the transfer after a split, the stall priced on a
// local prefill.
func TestCostEstimates(t *testing.T) {
	c := costConfig()
	e := Estimate{DecodeQueued: 5000, DecodeUncached: 8000, DecodeOpen: 10, PrefillQueued: 2000, PrefillUncached: 7000}
	// split: (2,000 + 7,000) / 10,000 s + 8,000 / 100,000 s + 1 ms
	require.Equal(t, 900*time.Millisecond+80*time.Millisecond+time.Millisecond, c.SplitTTFT(e))
	// local: (5,000 + 8,000) / 10,000 s
	require.Equal(t, 1300*time.Millisecond, c.LocalTTFT(e))
	require.True(t, c.SplitCheaper(e))

	c.DecodeStallWeight = 0.05 // + 0.05 × 10 open × 800 ms
	require.Equal(t, 1700*time.Millisecond, c.LocalTTFT(e))

	c.TransferLatency = -1 // none
	require.Equal(t, 980*time.Millisecond, c.SplitTTFT(e))
}

// The rule's cases: an idle decoder prefills a new long prompt itself (no
// transfer to pay); a decoder with a queue of prompt tokens sends it to an
// idle prefiller; a busy prefiller keeps it local; the stall weight tips
// a decoder with running requests to split (at the default weight one
// running request is enough); a tie stays local.
func TestCostRuleCases(t *testing.T) {
	c := costConfig()
	idle := Estimate{DecodeUncached: 8192, PrefillUncached: 8192}
	require.False(t, c.SplitCheaper(idle), "idle decoder: the transfer is the difference")

	queued := idle
	queued.DecodeQueued = 4096
	require.True(t, c.SplitCheaper(queued), "decoder queue longer than the transfer")

	busyPrefill := queued
	busyPrefill.PrefillQueued = 16384
	require.False(t, c.SplitCheaper(busyPrefill), "the prefiller's queue is longer still")

	running := idle
	running.DecodeOpen = 20
	require.False(t, c.SplitCheaper(running), "running requests cost nothing at weight 0")
	c.DecodeStallWeight = 0.01
	require.True(t, c.SplitCheaper(running), "priced stall: 20 × 0.01 × 819 ms > the 83 ms transfer")
	c.DecodeStallWeight = 0 // the default, 1
	one := idle
	one.DecodeOpen = 1
	require.True(t, c.SplitCheaper(one))
	one.PrefillQueued = 16384
	require.False(t, c.SplitCheaper(one), "unless the prefill queue is longer than the stall")

	c = costConfig()
	c.TransferLatency, c.TransferTokensPerSecond = -1, 1e18
	require.False(t, c.SplitCheaper(idle), "equal estimates stay local")
}

// The priced stall is capped at DecodeStallCap times the prefill's own
// time: a decoder with 40 running requests at weight 1 prices 4 × 819 ms,
// not 40 ×, so a prefill queue longer than that keeps the prompt local;
// a negative cap restores the unbounded price, and the config refuses a
// cap that is not a finite number.
func TestCostRuleStallCap(t *testing.T) {
	c := costConfig()
	c.DecodeStallWeight = 1 // DecodeStallCap 0: the default, 4
	busy := Estimate{DecodeUncached: 8192, DecodeOpen: 40, PrefillUncached: 8192}
	// local: 819.2 ms + min(40, 4) × 819.2 ms
	require.Equal(t, 5*819200*time.Microsecond, c.LocalTTFT(busy))
	require.True(t, c.SplitCheaper(busy), "an idle prefiller beats the capped stall")

	busy.PrefillQueued = 50_000 // 5 s queued on the prefiller
	require.False(t, c.SplitCheaper(busy), "a prefill queue longer than four prefills keeps it local")

	c.DecodeStallCap = -1 // no cap: 41 × 819.2 ms
	require.Equal(t, 41*819200*time.Microsecond, c.LocalTTFT(busy))
	require.True(t, c.SplitCheaper(busy), "uncapped, 40 running requests outweigh the 5 s queue")

	c.DecodeStallCap = 1
	require.Equal(t, 2*819200*time.Microsecond, c.LocalTTFT(busy))

	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		c.DecodeStallCap = bad
		require.ErrorIs(t, c.Validate(), ErrInvalidConfig)
	}
	_, err := LoadConfig(strings.NewReader(`{"decodeStallCap": 2}`))
	require.NoError(t, err)
}

// A huge estimate compares as huge: a queue of billions of tokens, or a
// throughput configured near zero, saturates at the largest Duration
// instead of wrapping to a negative one, so the side it weighs on loses
// the comparison (the transfer latency added to a saturated split
// estimate does not wrap it either).
func TestCostHugeEstimateSaturates(t *testing.T) {
	c := costConfig()
	queued := Estimate{DecodeQueued: 4096, DecodeUncached: 8192, PrefillUncached: 8192}
	require.True(t, c.SplitCheaper(queued), "the base case splits")

	hugePrefill := queued
	hugePrefill.PrefillQueued = math.MaxInt64
	require.Equal(t, time.Duration(math.MaxInt64), c.SplitTTFT(hugePrefill))
	require.False(t, c.SplitCheaper(hugePrefill), "a huge prefill queue keeps the prompt local")
	hugePrefill.PrefillUncached = math.MaxInt64 // the two counts' sum overflows int64
	require.Equal(t, time.Duration(math.MaxInt64), c.SplitTTFT(hugePrefill))
	require.False(t, c.SplitCheaper(hugePrefill))

	hugeDecode := queued
	hugeDecode.DecodeQueued = math.MaxInt64
	require.Equal(t, time.Duration(math.MaxInt64), c.LocalTTFT(hugeDecode))
	require.True(t, c.SplitCheaper(hugeDecode), "a huge decode queue splits")

	slowTransfer := c
	slowTransfer.TransferTokensPerSecond = 1e-300 // a valid, finite throughput
	require.NoError(t, slowTransfer.Validate())
	require.Equal(t, time.Duration(math.MaxInt64), slowTransfer.SplitTTFT(queued))
	require.False(t, slowTransfer.SplitCheaper(queued), "an endless transfer keeps the prompt local")

	slowPrefill := c
	slowPrefill.PrefillTokensPerSecond, slowPrefill.DecodeStallWeight = 5e-324, 0 // own time +Inf, times no stall
	require.Equal(t, time.Duration(math.MaxInt64), slowPrefill.LocalTTFT(Estimate{DecodeUncached: 1}))

	require.Equal(t, 1500*time.Millisecond, seconds(1.5))
	require.Equal(t, time.Duration(math.MinInt64), seconds(math.Inf(-1)))
	require.Equal(t, time.Duration(math.MaxInt64), seconds(math.NaN()))
}

// Through a real Router: with the cost rule on, a long new prompt on an
// idle fleet stays on its decoder (counted local_faster); once that
// decoder has a long prompt queued, the next one on it is split to the
// prefill endpoint; the threshold is still a floor.
func TestCostRuleThroughRouter(t *testing.T) {
	f := newFleet(t, costConfig(), Options{}, RolePrefill, RoleDecode)
	d1 := f.pick(t, "c1", prompt(70, 8192))
	require.Equal(t, f.eps[1].ID, d1.Endpoint.ID)
	require.Empty(t, d1.Roles, "idle decoder: local is faster")
	require.Equal(t, [2]int64{8192, 1}, f.load(t, f.eps[1].ID))
	require.Equal(t, 1.0, f.decisions(outcomeLocal, "local_faster"))

	d2 := f.pick(t, "c2", prompt(71, 8192))
	require.Len(t, d2.Roles, 1, "the decoder has 8,192 prompt tokens queued: split")
	require.Equal(t, f.eps[0].ID, d2.Roles[0].Endpoint.ID)
	require.Equal(t, 1.0, f.decisions(outcomeSplit, "uncached"))

	d3 := f.pick(t, "c3", prompt(72, 999))
	require.Empty(t, d3.Roles, "below nonCachedTokens, both endpoints with 8,192 tokens queued: local")
	require.Equal(t, 1.0, f.decisions(outcomeLocal, "cached"))

	for _, d := range []*kvroute.Decision{d1, d2, d3} {
		d.FirstChunk()
		d.Done(kvroute.DoneInfo{})
	}
	f.requireIdle(t)
}

// Below the threshold the cost rule decides too, its stall priced at
// BelowThresholdStallWeight: a short prompt on an idle decoder stays
// local; one on a decoder with many running requests goes to an idle
// prefiller (the prefill would stall them all), but not to a prefiller
// with a long prompt queued; one on a decoder with a prompt queued goes
// to an idle prefiller; a negative weight turns the extension off.
func TestCostRuleBelowThreshold(t *testing.T) {
	c := costConfig() // belowThresholdStallWeight 0: the default, 0.05
	idle := Estimate{DecodeUncached: 512, PrefillUncached: 512}
	// split: 51.2 ms + 1 ms + 5.12 ms against local 51.2 ms
	require.False(t, c.SplitCheaperBelowThreshold(idle), "idle decoder: the transfer is the difference")

	running := idle
	running.DecodeOpen = 40 // local: 51.2 ms × (1 + 0.05 × 40) = 153.6 ms
	l := c
	l.DecodeStallWeight = DefaultBelowThresholdStallWeight
	require.InDelta(t, float64(153600*time.Microsecond), float64(l.LocalTTFT(running)), float64(time.Microsecond))
	require.True(t, c.SplitCheaperBelowThreshold(running), "40 running requests stall 51 ms each")
	require.False(t, c.SplitCheaper(running), "at or above the threshold no stall is priced in costConfig")

	busyPrefill := running
	busyPrefill.PrefillQueued = 8192
	require.False(t, c.SplitCheaperBelowThreshold(busyPrefill), "the prefiller's queue is longer than the stall")

	queued := idle
	queued.DecodeQueued = 8192
	require.True(t, c.SplitCheaperBelowThreshold(queued), "the decoder's queue is longer than the transfer")

	c.BelowThresholdStallWeight = 1
	require.True(t, c.SplitCheaperBelowThreshold(Estimate{DecodeUncached: 512, PrefillUncached: 512, DecodeOpen: 1}))
	c.BelowThresholdStallWeight = -1
	require.False(t, c.SplitCheaperBelowThreshold(queued), "off")
}

// Through a real Router: a short prompt on a decoder with a long prompt
// queued is split to the idle prefiller (counted decode_busy, released
// once); with belowThresholdStallWeight negative, or the cost rule off, it
// stays local whatever the queues (reason cached).
func TestBelowThresholdThroughRouter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   func(*Config)
		split bool
	}{
		{"default", func(*Config) {}, true},
		{"off", func(c *Config) { c.BelowThresholdStallWeight = -1 }, false},
		{"no cost rule", func(c *Config) { c.CostRule = false }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := costConfig()
			cfg.NonCachedTokens = 1 << 20 // every prompt below the threshold
			tc.cfg(&cfg)
			f := newFleet(t, cfg, Options{}, RolePrefill, RoleDecode)
			d1 := f.pick(t, "q1", prompt(80, 8192))
			require.Empty(t, d1.Roles)
			require.Equal(t, [2]int64{8192, 1}, f.load(t, f.eps[1].ID))

			d2 := f.pick(t, "q2", prompt(81, 512))
			require.Equal(t, f.eps[1].ID, d2.Endpoint.ID)
			if tc.split {
				require.Len(t, d2.Roles, 1, "the decoder has 8,192 prompt tokens queued, the prefiller none")
				require.Equal(t, f.eps[0].ID, d2.Roles[0].Endpoint.ID)
				require.Equal(t, 1.0, f.decisions(outcomeSplit, "decode_busy"))
				require.Equal(t, 1.0, f.picks("prefill"))
				require.Equal(t, [2]int64{512, 1}, f.load(t, f.eps[0].ID))
				require.Equal(t, [2]int64{8192, 2}, f.load(t, f.eps[1].ID), "no prompt tokens charged to the decoder")
			} else {
				require.Empty(t, d2.Roles)
				require.Zero(t, f.decisions(outcomeSplit, "decode_busy"))
			}
			require.Equal(t, 2.0, f.decisions(outcomeLocal, "cached")+f.decisions(outcomeSplit, "decode_busy"))
			for _, d := range []*kvroute.Decision{d1, d2} {
				d.FirstChunk()
				d.Done(kvroute.DoneInfo{})
				d.Done(kvroute.DoneInfo{})
			}
			f.requireIdle(t)
		})
	}
}

// The decode pick weighs in-flight output tokens: of two decoders with one
// open request each, the one whose request asked for fewer tokens wins;
// the charge comes from max_tokens (or the default), is released at Done,
// by the request table's drop and by Release, once.
func TestDecodeLoadInOutputTokens(t *testing.T) {
	f := newFleet(t, Config{DefaultOutputTokens: 300}, Options{})
	dec1, dec2 := f.eps[2].ID, f.eps[3].ID
	pick := func(id string, tokens []uint32, body string) *kvroute.Decision {
		t.Helper()
		d, err := f.r.Pick(context.Background(), &kvroute.Request{ID: id, Body: []byte(body), Prompts: []render.Prompt{{TokenIDs: tokens}}}, f.eps)
		require.NoError(t, err)
		return d
	}
	long := pick("long", prompt(80, 100), `{"max_tokens":4000}`)
	require.Equal(t, dec1, long.Endpoint.ID)
	out, reqs := f.p.DecodeLoad(dec1)
	require.Equal(t, [2]int64{4000, 1}, [2]int64{out, reqs})

	short := pick("short", prompt(81, 100), `{"max_completion_tokens":50}`)
	require.Equal(t, dec2, short.Endpoint.ID, "the other decoder: 4,000 output tokens on the first")
	third := pick("third", prompt(82, 100), `{}`)
	require.Equal(t, dec2, third.Endpoint.ID, "one request each: 50 output tokens against 4,000")
	out, reqs = f.p.DecodeLoad(dec2)
	require.Equal(t, [2]int64{350, 2}, [2]int64{out, reqs}, "50 + the default 300")

	short.Done(kvroute.DoneInfo{})
	short.Done(kvroute.DoneInfo{})
	out, _ = f.p.DecodeLoad(dec2)
	require.EqualValues(t, 300, out, "released once")
	third.Release() // without a Done
	f.r.Decision("long").Done(kvroute.DoneInfo{})
	long.Release()
	for _, id := range []string{dec1, dec2} {
		out, reqs := f.p.DecodeLoad(id)
		require.Zero(t, out, id)
		require.Zero(t, reqs, id)
	}
	f.requireIdle(t)
}

// A split request charges its output tokens to the decode endpoint, not
// the prefill endpoint.
func TestSplitChargesOutputToDecoder(t *testing.T) {
	f := newFleet(t, Config{}, Options{})
	d, err := f.r.Pick(context.Background(), &kvroute.Request{Body: []byte(`{"max_tokens":128}`),
		Prompts: []render.Prompt{{TokenIDs: prompt(90, 4096)}}}, f.eps)
	require.NoError(t, err)
	require.Len(t, d.Roles, 1)
	out, _ := f.p.DecodeLoad(d.Endpoint.ID)
	require.EqualValues(t, 128, out)
	out, reqs := f.p.DecodeLoad(d.Roles[0].Endpoint.ID)
	require.Zero(t, out+reqs)
	d.FirstChunk()
	out, _ = f.p.DecodeLoad(d.Endpoint.ID)
	require.EqualValues(t, 128, out, "held until the end, not the first chunk")
	d.Done(kvroute.DoneInfo{})
	out, _ = f.p.DecodeLoad(d.Endpoint.ID)
	require.Zero(t, out)
}

// Endpoints that left the pool lose their decode-load counters once the
// tracker holds many more than the pool.
func TestOutputTrackerPruned(t *testing.T) {
	f := newFleet(t, Config{}, Options{})
	for i := range 40 {
		e := []kvroute.Endpoint{{ID: "10.1.0." + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ":1", Role: RoleDecode}}
		d, err := f.r.Pick(context.Background(), &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: prompt(100+i, 64)}}}, e)
		require.NoError(t, err)
		d.Done(kvroute.DoneInfo{})
	}
	require.LessOrEqual(t, f.p.out.Len(), 2*1+16+1)
}

// The cost rule's knobs are validated and defaulted.
func TestCostConfig(t *testing.T) {
	for _, bad := range []Config{
		{PrefillTokensPerSecond: -1}, {TransferTokensPerSecond: -1}, {DecodeStallWeight: math.NaN()},
		{DefaultOutputTokens: -1}, {DecodeQueueOutputTokens: -1},
		{BelowThresholdStallWeight: math.NaN()}, {BelowThresholdStallWeight: math.Inf(-1)},
	} {
		require.ErrorIs(t, bad.Validate(), ErrInvalidConfig, "%+v", bad)
	}
	d := Config{}.WithDefaults()
	require.Equal(t, DefaultPrefillTokensPerSecond, d.PrefillTokensPerSecond)
	require.Equal(t, DefaultTransferTokensPerSecond, d.TransferTokensPerSecond)
	require.Equal(t, DefaultTransferLatency, d.TransferLatency)
	require.EqualValues(t, DefaultOutputTokens, d.DefaultOutputTokens)
	require.EqualValues(t, DefaultDecodeQueueOutputTokens, d.DecodeQueueOutputTokens)
	require.False(t, d.CostRule, "off unless configured")
	require.Equal(t, DefaultDecodeStallWeight, d.DecodeStallWeight)
	require.Equal(t, DefaultBelowThresholdStallWeight, d.BelowThresholdStallWeight)
	require.Equal(t, -1.0, Config{BelowThresholdStallWeight: -1}.WithDefaults().WithDefaults().BelowThresholdStallWeight, "off stays off")
	// Negative means none, and stays so however often the defaults are applied.
	none := Config{TransferLatency: -1, DecodeStallWeight: -1, PrefillTokensPerSecond: 10_000, TransferTokensPerSecond: 100_000}
	twice := none.WithDefaults().WithDefaults()
	require.Equal(t, none.WithDefaults(), twice)
	e := Estimate{DecodeUncached: 10_000, DecodeOpen: 50, PrefillUncached: 10_000}
	require.Equal(t, time.Second, twice.LocalTTFT(e), "no stall priced")
	require.Equal(t, 1100*time.Millisecond, twice.SplitTTFT(e), "no transfer latency")

	c, err := LoadConfig(strings.NewReader(`{"costRule":true,"transferLatency":"2ms","prefillTokensPerSecond":12000,"decodeStallWeight":0.01,"defaultOutputTokens":256,"belowThresholdStallWeight":0.1}`))
	require.NoError(t, err)
	require.Equal(t, Config{CostRule: true, TransferLatency: 2 * time.Millisecond, PrefillTokensPerSecond: 12000, DecodeStallWeight: 0.01, DefaultOutputTokens: 256, BelowThresholdStallWeight: 0.1}, c)
	_, err = LoadConfig(strings.NewReader(`{"belowThresholdStallWeight":"0.1"}`))
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = LoadConfig(strings.NewReader(`{"costrule":true}`))
	require.ErrorIs(t, err, ErrInvalidConfig)
}
