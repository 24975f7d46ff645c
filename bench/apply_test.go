package bench

import (
	"fmt"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// applyFixture is a warm index with an Applier and a set of encoded
// current-vLLM BlockStored payloads: 512 prompts × 8 chained segments of 16
// blocks × 64 tokens, spread over 8 endpoints, in an order where every
// parent is stored before its children.
type applyFixture struct {
	ix        *kvindex.Index
	applier   *kvevents.Applier
	payloads  [][]byte
	endpoints []string // per payload
	targets   []string // the 8 endpoints the payloads go to
	prompt0   []uint32 // the tokens of prompt 0, all segments
}

const (
	applyPrompts  = 512
	applySegments = 8
	applyBlocks   = 16
)

var (
	applyOnce sync.Once
	applyFx   *applyFixture
	applyErr  error
)

func getApply(b *testing.B) *applyFixture {
	b.Helper()
	applyOnce.Do(func() { applyFx, applyErr = buildApply() })
	if applyErr != nil {
		b.Fatalf("apply fixture: %v", applyErr)
	}
	return applyFx
}

func buildApply() (*applyFixture, error) {
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	if err != nil {
		return nil, err
	}
	a, err := kvevents.NewApplier(kvevents.ApplierConfig{Model: Model}, ix, kvevents.Options{})
	if err != nil {
		return nil, err
	}
	f := &applyFixture{ix: ix, applier: a}
	// A resident population on other endpoints, so the block map is warm.
	if _, err := Background(ix, EndpointIDs(64)[8:], 1<<18, 256, 2); err != nil {
		return nil, err
	}
	f.targets = EndpointIDs(8)
	bs := ix.BlockSize()
	var batch wire.Batch
	batch.Events = make([]wire.Event, 1)
	for s := 0; s < applySegments; s++ {
		for p := 0; p < applyPrompts; p++ {
			toks := Tokens(uint64(p)<<8|uint64(s)|1<<40, applyBlocks*bs)
			if p == 0 {
				f.prompt0 = append(f.prompt0, toks...)
			}
			e := &batch.Events[0]
			*e = wire.Event{
				Type: wire.EventBlockStored, TokenIDs: toks, BlockSize: bs,
				Medium: "GPU", HasGroup: true, Group: 0, Kind: "full_attention",
				HasParent: s > 0, ParentHash: hashOf(p, s-1, applyBlocks-1),
			}
			for i := 0; i < applyBlocks; i++ {
				e.BlockHashes = append(e.BlockHashes, hashOf(p, s, i))
			}
			f.payloads = append(f.payloads, wire.AppendBatch(nil, &batch, wire.FormatVLLM))
			f.endpoints = append(f.endpoints, f.targets[p%len(f.targets)])
		}
	}
	return f, nil
}

// hashOf is the engine hash of block i of segment s of prompt p.
func hashOf(p, s, i int) uint64 { return uint64(p+1)<<32 | uint64(s)<<16 | uint64(i) }

// BenchmarkApply measures decode + apply of one current-vLLM BlockStored
// message of 16 blocks × 64 tokens into a warm index: the per-event cost of
// the subscriber workers. Each iteration stores a new chained segment; after
// every pass over the payloads the 8 target endpoints are cleared (outside
// the timer). Target ≥ 1,000,000 blocks/s on one core.
func BenchmarkApply(b *testing.B) {
	b.Run(fmt.Sprintf("blocks=%d", applyBlocks), func(b *testing.B) {
		f := getApply(b)
		for _, ep := range f.targets {
			f.ix.Clear(ep)
		}
		d := wire.NewDecoder(wire.Limits{})
		var batch wire.Batch
		stored, next, passes := 0, 0, 0
		b.SetBytes(int64(len(f.payloads[0])))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if next == len(f.payloads) {
				b.StopTimer()
				for _, ep := range f.targets {
					f.ix.Clear(ep)
				}
				next = 0
				passes++
				b.StartTimer()
			}
			if err := d.Decode(f.payloads[next], &batch); err != nil {
				b.Fatal(err)
			}
			res := f.applier.Apply(f.endpoints[next], Model, &batch)
			stored += res.StoredBlocks
			next++
		}
		b.StopTimer()
		if stored != applyBlocks*b.N {
			b.Fatalf("stored %d blocks, want %d", stored, applyBlocks*b.N)
		}
		b.ReportMetric(float64(stored)/b.Elapsed().Seconds(), "blocks/s")
		// Prompt 0 is matchable on its endpoint up to the segments applied
		// since the last clear.
		segs := min((next+applyPrompts-1)/applyPrompts, applySegments)
		keys := kvindex.Keys(nil, f.prompt0, f.ix.BlockSize(), &kvindex.KeyParams{Model: Model})
		var out kvindex.MatchResult
		f.ix.Match(keys, f.targets[:1], &out)
		if got := out.Endpoints()[0].Blocks; got != segs*applyBlocks {
			b.Fatalf("prompt 0 matches %d blocks after %d payloads, want %d", got, next, segs*applyBlocks)
		}
	})
}
