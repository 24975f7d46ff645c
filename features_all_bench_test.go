package kvroute_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
)

// loraSignals is a lora.Source with a fixed, fresh state per endpoint: each
// engine runs its model's adapter (ad-<model>) and has a free slot.
type loraSignals map[string]enginemetrics.Signal

func (s loraSignals) Signal(ep kvroute.Endpoint) (enginemetrics.Signal, bool) {
	sig, ok := s[ep.ID]
	return sig, ok
}

// featureRouter is the warm benchmark router of BenchmarkPickAllFour: 64
// endpoints, each holding 1 + (i/2) mod 32 blocks of the benchmark prompt
// (so endpoints 62 and 63 hold all 32) and 64 other prompts of 32 blocks.
// With all set, the even endpoints serve alpha and the odd ones beta, each
// endpoint's blocks are its model's adapter's (ad-alpha, ad-beta), and the
// router has the session scorer and profile, the LoRA scorer and an enabled
// approximate index (every endpoint approximate: events are off); without
// it, the same index holds the blocks under alpha on every endpoint.
func featureRouter(b *testing.B, all bool) (*kvroute.Router, []kvroute.Endpoint, []uint32, *session.Affinity) {
	b.Helper()
	const tokens, n = 2048, 64
	cfg := kvroute.DefaultConfig()
	cfg.Model = "alpha"
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	var opts kvroute.Options
	var aff *session.Affinity
	eps := make([]kvroute.Endpoint, n)
	for i := range eps {
		eps[i] = kvroute.Endpoint{ID: fmt.Sprintf("10.0.1.%d:8000", i+1)}
	}
	if all {
		ix, err := approx.New(approx.Config{Enabled: true}, approx.Options{Set: telemetry.Set{}})
		if err != nil {
			b.Fatal(err)
		}
		opts.Approximate = ix
		sig := loraSignals{}
		for i := range eps {
			m := []string{"alpha", "beta"}[i%2]
			eps[i].Models = []string{m}
			sig[eps[i].ID] = enginemetrics.Signal{LoRA: enginemetrics.LoRAInfo{Reported: true, Running: []string{"ad-" + m}, MaxLoRA: 4},
				Scraped: time.Now().Add(time.Hour)}
		}
		ls, err := lora.New(lora.Config{}, sig, lora.Options{})
		if err != nil {
			b.Fatal(err)
		}
		aff, err = session.New(session.Config{}, session.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(aff.Close)
		opts.Scorers = []kvroute.WeightedScorer{ls.Weighted(), aff.Scorer()}
		opts.Profile = aff.Profile(nil)
	}
	r, err := kvroute.New(context.Background(), cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	if err := r.SetEndpoints(eps); err != nil {
		b.Fatal(err)
	}
	p := make([]uint32, tokens)
	for i := range p {
		p[i] = uint32(7_000_003 + i)
	}
	bs := r.Index().BlockSize()
	nb := tokens / bs
	for i, e := range eps {
		root := "alpha"
		if all {
			root = "ad-" + e.Models[0]
		}
		held := 1 + (i/2)%nb
		hashes := make([]uint64, held)
		for j := range hashes {
			hashes[j] = uint64(i*1_000_000 + j + 1)
		}
		if err := r.Index().Store(e.ID, &kvindex.StoreEvent{EngineHashes: hashes, Tokens: p[:held*bs],
			BlockSize: bs, Model: root, Group: -1}); err != nil {
			b.Fatal(err)
		}
		for k := range 64 {
			other := make([]uint32, tokens)
			for t := range other {
				other[t] = uint32((1000+i*64+k)*1_000_003 + t)
			}
			hs := make([]uint64, nb)
			for j := range hs {
				hs[j] = uint64(i*1_000_000 + (k+1)*1000 + j)
			}
			if err := r.Index().Store(e.ID, &kvindex.StoreEvent{EngineHashes: hs, Tokens: other,
				BlockSize: bs, Model: root, Group: -1}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return r, eps, p, aff
}

// BenchmarkPickAllFour alternates, in one run, Pick on a router with none
// of the four features of several-models routing configured and Pick on a
// router with all four on: the session-affinity scorer and profile (a
// session key in x-session-id, 16 sessions in turn), the LoRA scorer (each
// request names its model's adapter, running on every engine of that
// model), two models (alpha on 32 endpoints, beta on the other 32) with a
// rewrite table splitting "canary" evenly between them (resolved per
// request, inside the timed section), and the approximate index enabled
// (every endpoint approximate, so the approximate stage matches every
// candidate and records each decision). It reports both medians, the ratio
// all/none, and each one's allocations per pick; every decision is checked:
// the fully warm endpoint of the request's model, and with all four on an
// approximate decision recorded as its session's endpoint.
func BenchmarkPickAllFour(b *testing.B) {
	const tokens = 2048
	none, neps, p, _ := featureRouter(b, false)
	all, aeps, _, aff := featureRouter(b, true)
	table, err := models.NewTable([]models.Rule{{Model: "canary", Targets: []models.Target{{Model: "alpha", Weight: 1}, {Model: "beta", Weight: 1}}}}, models.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	plain := &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	headers := make([]http.Header, 16)
	for i := range headers {
		headers[i] = http.Header{}
		headers[i].Set("x-session-id", fmt.Sprintf("session-%d", i))
	}
	featured := &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	check := func(d *kvroute.Decision, err error, model string) {
		if err != nil {
			b.Fatal(err)
		}
		if d.CachedTokens != tokens {
			b.Fatalf("picked %s with %d cached tokens; the fully warm endpoint holds %d", d.Endpoint.ID, d.CachedTokens, tokens)
		}
		if model != "" && !slices.Contains(d.Endpoint.Models, model) {
			b.Fatalf("a %s request went to %s, which serves %v", model, d.Endpoint.ID, d.Endpoint.Models)
		}
	}
	runNone := func() time.Duration {
		t0 := time.Now()
		d, err := none.Pick(ctx, plain, neps)
		elapsed := time.Since(t0)
		check(d, err, "")
		d.Done(kvroute.DoneInfo{})
		d.Release()
		return elapsed
	}
	turn := 0
	runAll := func() time.Duration {
		turn++
		t0 := time.Now()
		model, _ := table.Resolve("canary")
		featured.Model, featured.LoRA = model, "ad-"+model
		featured.Header, featured.Session = headers[turn%len(headers)], ""
		d, err := all.Pick(ctx, featured, aeps)
		elapsed := time.Since(t0)
		check(d, err, model)
		if d.CacheMode != approx.ModeApproximate {
			b.Fatalf("mode %v, want approximate", d.CacheMode)
		}
		if ep, ok := aff.Endpoint(featured.Session); !ok || ep != d.Endpoint.ID {
			b.Fatalf("session %q recorded at %q (%v), want %s", featured.Session, ep, ok, d.Endpoint.ID)
		}
		d.Done(kvroute.DoneInfo{})
		d.Release()
		return elapsed
	}
	allocsNone := testing.AllocsPerRun(200, func() { runNone() })
	allocsAll := testing.AllocsPerRun(200, func() { runAll() })
	noneT := make([]time.Duration, 0, b.N)
	allT := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			noneT = append(noneT, runNone())
			allT = append(allT, runAll())
		} else {
			allT = append(allT, runAll())
			noneT = append(noneT, runNone())
		}
	}
	b.StopTimer()
	slices.Sort(noneT)
	slices.Sort(allT)
	mNone, mAll := noneT[len(noneT)/2], allT[len(allT)/2]
	b.ReportMetric(float64(mNone.Nanoseconds()), "none-p50-ns")
	b.ReportMetric(float64(mAll.Nanoseconds()), "all4-p50-ns")
	b.ReportMetric(float64(mAll)/float64(mNone), "all4/none")
	b.ReportMetric(allocsNone, "none-allocs")
	b.ReportMetric(allocsAll, "all4-allocs")
}
