package kvroute

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
)

// warmRouter builds the benchmark's router: no events or render (the prompt's
// tokens are supplied), and a warm index in which every endpoint holds a
// different share of the prompt plus 64 unrelated full-length prompts each.
func warmRouter(b *testing.B, tokens, n int) (*Router, []Endpoint, []uint32) {
	b.Helper()
	return warmRouterWith(b, tokens, n, Options{})
}

// warmRouterWith is warmRouter with the router's Options.
func warmRouterWith(b *testing.B, tokens, n int, opts Options) (*Router, []Endpoint, []uint32) {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	r, err := New(context.Background(), cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	eps := endpoints(n)
	p := prompt(1, tokens)
	bs := r.Index().BlockSize()
	nb := tokens / bs
	for i, e := range eps {
		held := 1 + i%nb
		hashes := make([]uint64, held)
		for j := range hashes {
			hashes[j] = uint64(i*1_000_000 + j + 1)
		}
		if err := r.Index().Store(e.ID, &kvindex.StoreEvent{EngineHashes: hashes, Tokens: p[:held*bs],
			BlockSize: bs, Model: testModel, Group: -1}); err != nil {
			b.Fatal(err)
		}
		for k := 0; k < 64; k++ {
			other := prompt(1000+i*64+k, tokens)
			hs := make([]uint64, nb)
			for j := range hs {
				hs[j] = uint64(i*1_000_000 + (k+1)*1000 + j)
			}
			if err := r.Index().Store(e.ID, &kvindex.StoreEvent{EngineHashes: hs, Tokens: other,
				BlockSize: bs, Model: testModel, Group: -1}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return r, eps, p
}

func checkWarm(b *testing.B, d *Decision, err error, tokens int) {
	if err != nil {
		b.Fatal(err)
	}
	if d.CachedTokens != tokens {
		b.Fatalf("picked %s with %d cached tokens; the fully warm endpoint holds %d", d.Endpoint.ID, d.CachedTokens, tokens)
	}
}

// BenchmarkPick measures a full Pick — block keys, index match, affinity
// filter and token-load score, speculative entries and load accounting —
// with the prompt's tokens supplied (render excluded) against a warm index.
func BenchmarkPick(b *testing.B) {
	for _, tc := range []struct{ tokens, endpoints int }{{2048, 64}} {
		b.Run(fmt.Sprintf("tokens=%d/endpoints=%d", tc.tokens, tc.endpoints), func(b *testing.B) {
			r, eps, p := warmRouter(b, tc.tokens, tc.endpoints)
			req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d, err := r.Pick(ctx, req, eps)
				checkWarm(b, d, err, tc.tokens)
				d.Done(DoneInfo{})
				d.Release()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tc.tokens/r.cfg.BlockSize), "ns/block")
		})
	}
}

// BenchmarkPickStagedVsMonolithic alternates the staged Pick and the
// single-function Pick it replaced (legacyPick) on the same warm router, one
// call each per iteration in alternating order, so both see the same machine
// load and neither always runs second on the other's warm caches. It reports the
// median time per pick of each (robust to the preemptions of a shared
// machine) and the ratio of the medians (staged/monolithic; 1.00 = the
// stages cost nothing).
func BenchmarkPickStagedVsMonolithic(b *testing.B) {
	const tokens, n = 2048, 64
	r, eps, p := warmRouter(b, tokens, n)
	req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	ctx := context.Background()
	staged := make([]time.Duration, 0, b.N)
	mono := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	run := func(pick func(context.Context, *Request, []Endpoint) (*Decision, error)) time.Duration {
		t0 := time.Now()
		d, err := pick(ctx, req, eps)
		elapsed := time.Since(t0)
		checkWarm(b, d, err, tokens)
		d.Done(DoneInfo{})
		return elapsed
	}
	for i := 0; i < b.N; i++ {
		if i%2 == 0 { // alternate which one runs first, so neither gets the other's warm caches
			staged = append(staged, run(r.Pick))
			mono = append(mono, run(r.legacyPick))
		} else {
			mono = append(mono, run(r.legacyPick))
			staged = append(staged, run(r.Pick))
		}
	}
	b.StopTimer()
	ms, mm := median(staged), median(mono)
	b.ReportMetric(float64(ms.Nanoseconds()), "staged-p50-ns/pick")
	b.ReportMetric(float64(mm.Nanoseconds()), "monolithic-p50-ns/pick")
	b.ReportMetric(float64(ms)/float64(mm), "staged/monolithic")
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkPickWithRequestID is Pick with a Request.ID, ended through
// Router.Decision as a host with only the ID would: the cost of the
// request-ID table.
func BenchmarkPickWithRequestID(b *testing.B) {
	const tokens, n = 2048, 64
	r, eps, p := warmRouter(b, tokens, n)
	ctx := context.Background()
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = "req-" + strconv.Itoa(i)
	}
	req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.ID = ids[i%len(ids)]
		d, err := r.Pick(ctx, req, eps)
		checkWarm(b, d, err, tokens)
		byID := r.Decision(req.ID)
		if byID == nil {
			b.Fatalf("request %s was not in flight", req.ID)
		}
		byID.FirstChunk()
		byID.Done(DoneInfo{})
	}
	if r.Requests().Len() != 0 {
		b.Fatalf("%d requests left in the table", r.Requests().Len())
	}
}
