package kvevents

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

const testEndpoint = "10.0.0.1:8000"

type applyFixture struct {
	t   *testing.T
	ix  *kvindex.Index
	a   *Applier
	reg *prometheus.Registry
	d   *wire.Decoder
	b   wire.Batch
	log *bytes.Buffer
}

func newApplyFixture(t *testing.T) *applyFixture {
	t.Helper()
	ix, err := kvindex.New(kvindex.Config{BlockSize: 4, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	reg := prometheus.NewRegistry()
	var logBuf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := NewApplier(ApplierConfig{Model: "m"}, ix, Options{Set: telemetry.Set{Registerer: reg, Logger: logger}})
	require.NoError(t, err)
	return &applyFixture{t: t, ix: ix, a: a, reg: reg, d: wire.NewDecoder(wire.Limits{}), log: &logBuf}
}

// applyHex decodes a golden payload and applies it for endpoint.
func (f *applyFixture) applyHex(endpoint, hexPayload string) ApplyResult {
	f.t.Helper()
	require.NoError(f.t, f.d.Decode(wiretest.MustHex(f.t, hexPayload), &f.b))
	return f.a.Apply(endpoint, "", &f.b)
}

// applyBatch encodes b as current vLLM would, decodes it, and applies it.
func (f *applyFixture) applyBatch(endpoint string, b *wire.Batch, format wire.Format) ApplyResult {
	f.t.Helper()
	require.NoError(f.t, f.d.Decode(wire.AppendBatch(nil, b, format), &f.b))
	return f.a.Apply(endpoint, "", &f.b)
}

// match returns how many blocks of tokens endpoint holds contiguously.
func (f *applyFixture) match(endpoint string, tokens []uint32, p kvindex.KeyParams) kvindex.EndpointMatch {
	f.t.Helper()
	if p.Model == "" {
		p.Model = "m"
	}
	keys := kvindex.Keys(nil, tokens, 4, &p)
	var out kvindex.MatchResult
	f.ix.Match(keys, []string{endpoint, "other:1"}, &out)
	require.Zero(f.t, out.Endpoints()[1].Blocks, "an endpoint that stored nothing matches nothing")
	return out.Endpoints()[0]
}

func vector(t *testing.T, name string) string {
	for _, v := range wiretest.Vectors() {
		if v.Name == name {
			return v.Hex
		}
	}
	t.Fatalf("no vector %s", name)
	return ""
}

// TestApplyChainedStoresMatchable: V1 stores blocks [1..4][5..8] at the
// root; a V2-style store chained on H2 adds [9..12]. The request's keys,
// computed independently from its tokens, then match all three blocks.
func TestApplyChainedStoresMatchable(t *testing.T) {
	f := newApplyFixture(t)
	res := f.applyHex(testEndpoint, vector(t, "V1/current"))
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 2}, res)

	next := wiretest.StoredV1()
	next.BlockHashes = []uint64{0x3333}
	next.ParentHash, next.HasParent = wiretest.H2, true
	next.TokenIDs = wiretest.TokensRange(9, 12)
	next.ExtraKeys = [][]wire.ExtraKey{nil}
	res = f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, next), wire.FormatVLLMLegacy)
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 1}, res)

	prompt := append(wiretest.TokensRange(1, 12), 13, 14) // a partial tail block is never keyed
	m := f.match(testEndpoint, prompt, kvindex.KeyParams{})
	require.Equal(t, 3, m.Blocks)
	require.Equal(t, 3, m.GPU)
	require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks)
	require.Zero(t, f.match(testEndpoint, wiretest.TokensRange(1, 12), kvindex.KeyParams{Model: "other-model"}).Blocks,
		"the model is the chain root")
	require.Zero(t, f.match(testEndpoint, wiretest.TokensRange(2, 13), kvindex.KeyParams{}).Blocks)
}

func TestApplyLegacyAndCurrentAgree(t *testing.T) {
	for _, name := range []string{"V1/current", "V1/legacy"} {
		f := newApplyFixture(t)
		f.applyHex(testEndpoint, vector(t, name))
		require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks, name)
	}
}

func TestApplyLoRAReplacesModelRoot(t *testing.T) {
	f := newApplyFixture(t)
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 1}, f.applyHex(testEndpoint, vector(t, "V7/current")))
	require.Equal(t, 1, f.match(testEndpoint, wiretest.TokensRange(1, 4), kvindex.KeyParams{LoRA: "my-lora"}).Blocks)
	require.Zero(t, f.match(testEndpoint, wiretest.TokensRange(1, 4), kvindex.KeyParams{}).Blocks)

	// vLLM also puts the LoRA name in every block's extra keys; it must be
	// dropped (it is the root already), or LoRA requests would never match.
	e := wiretest.WantV7().Events[0]
	e.BlockHashes = []uint64{1, 2}
	e.TokenIDs = wiretest.TokensRange(1, 8)
	e.ExtraKeys = [][]wire.ExtraKey{{{Kind: wire.ExtraKeyString, Value: "my-lora"}}, {{Kind: wire.ExtraKeyString, Value: "my-lora"}}}
	f.applyBatch("lora-ep:1", wiretest.BatchOf(0, true, e), wire.FormatVLLM)
	require.Equal(t, 2, f.match("lora-ep:1", wiretest.TokensRange(1, 8), kvindex.KeyParams{LoRA: "my-lora"}).Blocks)
}

func TestApplyCacheSaltOnBlockZero(t *testing.T) {
	f := newApplyFixture(t)
	f.applyHex(testEndpoint, vector(t, "V8/current")) // vLLM: salt in extra_keys of block 0
	require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{CacheSalt: "salt-A"}).Blocks)
	require.Zero(t, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks)

	// SGLang: the salt arrives in the metadata element; it keys block 0 the
	// same way, so salted requests match SGLang endpoints too.
	f.applyHex("sglang:1", vector(t, "S2/sglang"))
	require.Equal(t, 1, f.match("sglang:1", wiretest.TokensRange(1, 4), kvindex.KeyParams{CacheSalt: "salt-A"}).Blocks)
	require.Zero(t, f.match("sglang:1", wiretest.TokensRange(1, 4), kvindex.KeyParams{}).Blocks)

	// SGLang's map events: cache_salt is a field of BlockStored itself. The
	// salted root block and its child chain under the salt (S3's two
	// stores, without its removal and clear); an unsalted request matches
	// neither.
	require.NoError(t, f.d.Decode(wiretest.MustHex(t, wiretest.S3Hex), &f.b))
	f.b.Events = f.b.Events[:2]
	require.Equal(t, 2, f.a.Apply("sglang:2", "", &f.b).Stored)
	require.Equal(t, 2, f.match("sglang:2", wiretest.TokensRange(1, 8), kvindex.KeyParams{CacheSalt: "salt-A"}).Blocks)
	require.Zero(t, f.match("sglang:2", wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks)
}

func TestApplyMultimodalExtraKeys(t *testing.T) {
	f := newApplyFixture(t)
	e := wiretest.StoredV1()
	// An image occupying tokens 2..5 overlaps both blocks; vLLM's pair form
	// on block 0 and the bare identifier (v0.18+) on block 1.
	e.ExtraKeys = [][]wire.ExtraKey{{{Kind: wire.ExtraKeyMM, Value: "img-1", Offset: 2}}, {{Kind: wire.ExtraKeyString, Value: "img-1"}}}
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, e), wire.FormatVLLM)
	mm := kvindex.KeyParams{MM: []kvindex.MMItem{{Hash: "img-1", Offset: 2, Length: 4}}}
	require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 8), mm).Blocks)
	require.Zero(t, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks)
}

func TestApplySGLangChainRemoveClear(t *testing.T) {
	f := newApplyFixture(t)
	s1 := wiretest.WantS1()
	stores := wiretest.BatchOf(0, true, s1.Events[0], s1.Events[1])
	require.Equal(t, ApplyResult{Stored: 2, StoredBlocks: 2}, f.applyBatch("sglang:1", stores, wire.FormatSGLang))
	require.Equal(t, 2, f.match("sglang:1", wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks,
		"the negative int64 parent resolves to the block it names")

	res := f.applyHex("sglang:1", vector(t, "S1/sglang"))
	require.Equal(t, 2, res.Stored)
	require.Equal(t, 1, res.Removed)
	require.Equal(t, 1, res.Cleared)
	require.Zero(t, f.match("sglang:1", wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks)
	require.Zero(t, f.ix.Stats().Blocks)
}

func TestApplyRemoveAndClear(t *testing.T) {
	f := newApplyFixture(t)
	f.applyHex(testEndpoint, vector(t, "V1/current"))
	f.applyHex("10.0.0.2:8000", vector(t, "V1/legacy"))

	res := f.applyHex(testEndpoint, vector(t, "V3/current")) // removes H1 (block 0), group 0
	require.Equal(t, 1, res.Removed)
	require.Equal(t, 1, res.RemovedBlocks)
	require.Zero(t, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks, "contiguous from block 0")
	require.Equal(t, 2, f.match("10.0.0.2:8000", wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks, "other endpoint untouched")

	res = f.applyHex("10.0.0.2:8000", vector(t, "V4/current"))
	require.Equal(t, 1, res.Cleared)
	require.Equal(t, 2, res.ClearedBlocks)
	require.Zero(t, f.match("10.0.0.2:8000", wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks)
}

func skipped(t *testing.T, reg *prometheus.Registry, kind string, reason Reason) float64 {
	t.Helper()
	m, err := newMetrics(&registrar{set: telemetry.Set{Registerer: reg}}) // reuses the registered collectors
	require.NoError(t, err)
	return testutil.ToFloat64(m.StoresSkipped.WithLabelValues(kind, string(reason)))
}

func dropped(t *testing.T, reg *prometheus.Registry, endpoint string, reason Reason) float64 {
	t.Helper()
	m, err := newMetrics(&registrar{set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	return testutil.ToFloat64(m.Dropped.WithLabelValues(endpoint, string(reason)))
}

func TestApplyParentMissingCountedAndLogged(t *testing.T) {
	f := newApplyFixture(t)
	res := f.applyHex(testEndpoint, vector(t, "V2/current")) // parent 0xDEADBEEF never stored
	require.Equal(t, ApplyResult{Dropped: 1, ParentMissing: 1}, res)
	require.Equal(t, 1.0, dropped(t, f.reg, testEndpoint, kvindex.ReasonParentMissing))
	require.Contains(t, f.log.String(), "Failed to get request key for parent block")
	require.Contains(t, f.log.String(), "level=DEBUG")
	require.Zero(t, f.ix.Stats().Blocks)
}

func TestApplySkipsCounted(t *testing.T) {
	f := newApplyFixture(t)
	swa := wiretest.StoredV1()
	swa.Group, swa.Kind = 1, "chunked_local_attention" // a kind kvroute neither indexes nor tracks (apply_groups.go)
	nonDense := wiretest.StoredV1()
	nonDense.TokenIDs = wiretest.TokensRange(1, 7)
	wrongSize := wiretest.StoredV1()
	wrongSize.BlockSize, wrongSize.TokenIDs = 2, wiretest.TokensRange(1, 4)
	zeroSize := wiretest.StoredV1()
	zeroSize.BlockSize = 0
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, swa, nonDense, wrongSize, zeroSize), wire.FormatVLLM)
	// Another block size is re-chunked at the index's (apply_resize.go):
	// two blocks of 2 tokens are one router block of 4.
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 2, Skipped: 3, SkippedBlocks: 6}, res)
	require.Equal(t, 1.0, skipped(t, f.reg, "chunked_local_attention", kvindex.ReasonNonPrefixKind))
	require.Equal(t, 1.0, skipped(t, f.reg, "full_attention", kvindex.ReasonNonDense))
	require.Equal(t, 0.0, skipped(t, f.reg, "full_attention", kvindex.ReasonBlockSizeMismatch))
	require.Equal(t, 1.0, skipped(t, f.reg, "full_attention", skipInvalidBlockSize))

	// Removals: group 1 is chunked local (learnt from the skipped store),
	// group 7 was never seen, an ungrouped removal is always processed.
	rmSWA := wiretest.RemovedH(wiretest.H1)
	rmSWA.Group = 1
	rmUnknown := wiretest.RemovedH(wiretest.H1)
	rmUnknown.Group = 7
	rmUngrouped := wiretest.RemovedH(wiretest.H1)
	rmUngrouped.HasGroup = false
	res = f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, rmSWA, rmUnknown, rmUngrouped), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Skipped: 2, SkippedBlocks: 2, Removed: 1}, res)
	require.Equal(t, 2.0, skipped(t, f.reg, "chunked_local_attention", kvindex.ReasonNonPrefixKind))
	require.Equal(t, 1.0, skipped(t, f.reg, "unknown", skipUnknownGroup))
}

// The cache_kind label of the skipped-stores counter is one of a closed
// set: vLLM's KV-cache spec kinds (KVCacheSpecKind, "unknown" included) as
// they are, "none" for an event without a kind, and "other" for any other
// string. A publisher sending ever new kv_cache_spec_kind strings adds one
// series, not one per string.
func TestApplySkippedCacheKindLabelIsBounded(t *testing.T) {
	f := newApplyFixture(t)
	const madeUp = 300
	for i := range madeUp {
		e := wiretest.StoredV1()
		e.Group, e.Kind = 1, fmt.Sprintf("made-up-kind-%d", i)
		res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, e), wire.FormatVLLM)
		require.Equal(t, 1, res.Skipped, "a kind kvroute does not know is not indexed")
	}
	m, err := newMetrics(&registrar{set: telemetry.Set{Registerer: f.reg}})
	require.NoError(t, err)
	require.Equal(t, 1, testutil.CollectAndCount(m.StoresSkipped), "made-up kinds share one series")
	require.Equal(t, float64(madeUp), skipped(t, f.reg, "other", kvindex.ReasonNonPrefixKind))

	vllmKinds := []string{"full_attention", "mla_attention", "sliding_window", "sliding_window_mla", "mamba",
		"chunked_local_attention", "sink_full_attention", "encoder_only_attention", "cross_attention", "unknown"}
	for _, k := range vllmKinds {
		require.Equal(t, k, cacheKindLabel(k), "vLLM's kinds keep their name")
	}
	require.Equal(t, "none", cacheKindLabel(""))
	require.Equal(t, "other", cacheKindLabel("Full_Attention"))
}

func TestApplyUnknownEventsCounted(t *testing.T) {
	f := newApplyFixture(t)
	payload := []byte{0x93, 0x00, 0x92, 0x91, 0xa7, 'F', 'u', 't', 'u', 'r', 'e', 'X',
		0x91, 0xb0, 'A', 'l', 'l', 'B', 'l', 'o', 'c', 'k', 's', 'C', 'l', 'e', 'a', 'r', 'e', 'd', 0x00}
	require.NoError(t, f.d.Decode(payload, &f.b))
	res := f.a.Apply(testEndpoint, "m", &f.b)
	require.Equal(t, ApplyResult{Cleared: 1, Dropped: 1, Unknown: 1}, res, "the rest of the batch still applies")
	require.Equal(t, 1.0, dropped(t, f.reg, testEndpoint, dropUnknownEvent))
}

func TestApplyTierOnlyOffload(t *testing.T) {
	f := newApplyFixture(t)
	f.applyHex(testEndpoint, vector(t, "V1/current"))
	offload := wiretest.StoredV1()
	offload.Medium, offload.TokenIDs = "CPU", nil
	offload.BlockHashes = []uint64{wiretest.H1, 0x9999} // second hash unknown
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, offload), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 1, SkippedBlocks: 1}, res)
	require.Equal(t, 1.0, skipped(t, f.reg, "full_attention", kvindex.ReasonUnknownHash))
	m := f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{})
	require.Equal(t, 2, m.GPU)
	require.Equal(t, 1, m.CPU)
}

// TestApplyShippedMediumNames: engines have shipped other names for the
// same tiers, vLLM v0.26's FS and OBJ secondary tiers (STORAGE since) and
// SGLang's CPU_TIER1 host and CPU_TIER2 storage tiers (CPU_PINNED and DISK
// since). Each lands in the tier it names, weighed as that tier, never in a
// tier of its own that scores like the GPU.
func TestApplyShippedMediumNames(t *testing.T) {
	for _, tc := range []struct {
		medium     string
		cpu, store int
	}{
		{"FS", 0, 1}, {"OBJ", 0, 1}, {"CPU_TIER1", 1, 0}, {"CPU_TIER2", 0, 1},
	} {
		t.Run(tc.medium, func(t *testing.T) {
			f := newApplyFixture(t)
			f.applyHex(testEndpoint, vector(t, "V1/current"))
			offload := wiretest.StoredV1()
			offload.Medium, offload.TokenIDs, offload.BlockHashes = tc.medium, nil, []uint64{wiretest.H1}
			require.Equal(t, 1, f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, offload), wire.FormatVLLM).Stored)
			require.Equal(t, 1, f.a.Apply(testEndpoint, "", wiretest.BatchOf(0, true, wiretest.RemovedH(wiretest.H2))).Removed)
			m := f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{})
			require.Equal(t, 1, m.GPU)
			require.Equal(t, tc.cpu, m.CPU)
			require.Equal(t, tc.store, m.Storage)
			require.Zero(t, m.Other)
		})
	}
}

func TestApplyWithoutMetrics(t *testing.T) {
	ix, err := kvindex.New(kvindex.Config{BlockSize: 4, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	a, err := NewApplier(ApplierConfig{}, ix, Options{})
	require.NoError(t, err)
	require.Nil(t, a.metrics())
	var b wire.Batch
	require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(wiretest.MustHex(t, vector(t, "V2/current")), &b))
	require.Equal(t, ApplyResult{Dropped: 1, ParentMissing: 1}, a.Apply(testEndpoint, "m", &b))
	_, err = NewApplier(ApplierConfig{}, nil, Options{})
	require.Error(t, err)
}

func TestApplySharedMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(&registrar{set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	ix, err := kvindex.New(kvindex.Config{BlockSize: 4, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	a, err := NewApplier(ApplierConfig{}, ix, Options{Set: telemetry.Set{Registerer: reg}, metrics: m.applyMetrics})
	require.NoError(t, err)
	require.Same(t, m.applyMetrics, a.metrics())
	m.drop(testEndpoint, dropQueueFull, 2)
	require.Equal(t, 2.0, testutil.ToFloat64(m.Dropped.WithLabelValues(testEndpoint, string(dropQueueFull))))
	m.forgetEndpoint(testEndpoint)
	require.Zero(t, testutil.CollectAndCount(m.Dropped))
	var nilMetrics *eventMetrics
	nilMetrics.drop("x", "y", 1) // no-op, no panic
	nilMetrics.forgetEndpoint("x")
	var nilApply *applyMetrics
	nilApply.drop("x", "y", 1)
	nilApply.skip("x", "y", 1)
}

// TestApplyConcurrentEndpoints applies batches for several endpoints from
// several goroutines (run with -race), then checks every endpoint's chain.
func TestApplyConcurrentEndpoints(t *testing.T) {
	f := newApplyFixture(t)
	payload := wiretest.MustHex(t, vector(t, "V1/current"))
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := wire.NewDecoder(wire.Limits{})
			var b wire.Batch
			for i := 0; i < 50; i++ {
				if err := d.Decode(payload, &b); err != nil {
					t.Error(err)
					return
				}
				f.a.Apply(fmt.Sprintf("10.0.%d.%d:8000", g, i%5), "m", &b)
			}
		}()
	}
	wg.Wait()
	for g := 0; g < 4; g++ {
		for i := 0; i < 5; i++ {
			require.Equal(t, 2, f.match(fmt.Sprintf("10.0.%d.%d:8000", g, i), wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks)
		}
	}
	f.a.forget("10.0.0.0:8000")
	require.False(t, strings.Contains(f.log.String(), "ERROR"))
}

func TestApplyNegativeGroupSkipped(t *testing.T) {
	f := newApplyFixture(t)
	st := wiretest.StoredV1()
	st.Group = -3
	rm := wiretest.RemovedH(wiretest.H1)
	rm.Group = -3
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, st, rm), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Skipped: 2, SkippedBlocks: 3}, res)
	require.Equal(t, 1.0, skipped(t, f.reg, "full_attention", kvindex.ReasonMalformed))
	require.Equal(t, 1.0, skipped(t, f.reg, "none", kvindex.ReasonMalformed))
}

// TestApplyLoRAAndSaltSameName: vLLM's extra keys of a LoRA request's block
// are the adapter name first, then the multimodal items, then (block 0
// only) the cache salt, then prompt-embedding hashes. Only that leading
// name is the key root; a salt (or any later key) that happens to spell
// the adapter's name is still a key of the block. A request that salts
// with its own adapter's name therefore matches its blocks, and the same
// adapter's unsalted request, whose engine blocks have no salt, does not.
func TestApplyLoRAAndSaltSameName(t *testing.T) {
	f := newApplyFixture(t)
	e := wiretest.WantV7().Events[0]
	e.BlockHashes = []uint64{1, 2}
	e.TokenIDs = wiretest.TokensRange(1, 8)
	e.LoRAName = "tenant-a"
	lora := wire.ExtraKey{Kind: wire.ExtraKeyString, Value: "tenant-a"}
	e.ExtraKeys = [][]wire.ExtraKey{{lora, {Kind: wire.ExtraKeyString, Value: "tenant-a"}}, {lora}}
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 2}, f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, e), wire.FormatVLLM))
	require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{LoRA: "tenant-a", CacheSalt: "tenant-a"}).Blocks)
	require.Zero(t, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{LoRA: "tenant-a"}).Blocks,
		"the engine's blocks are salted: an unsalted request of the adapter never hits them")
}

// TestApplySGLangAlignedSalt: SGLang's vLLM-aligned layout salts every
// store of a salted chain (metadata map and a mirrored extra key). The
// chain is keyed as the request side keys it, the salt on block 0 only,
// so a salted request matches both blocks and an unsalted one neither.
func TestApplySGLangAlignedSalt(t *testing.T) {
	f := newApplyFixture(t)
	require.NoError(t, f.d.Decode(wiretest.MustHex(t, wiretest.S4Hex), &f.b))
	f.b.Events = f.b.Events[:2]
	require.Equal(t, ApplyResult{Stored: 2, StoredBlocks: 2}, f.a.Apply("sglang:1", "", &f.b))
	require.Equal(t, 2, f.match("sglang:1", wiretest.TokensRange(1, 8), kvindex.KeyParams{CacheSalt: "salt-A"}).Blocks)
	require.Zero(t, f.match("sglang:1", wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks)
}

// TestApplyOffloadPlaceholder: vLLM's offloading connector announces an
// offloaded block it has no request metadata for as a placeholder store
// (vllm/distributed/kv_transfer/kv_connector/v1/offloading/events.py,
// _placeholder_stored): the block's hash, no parent, no tokens, block_size
// 0, the medium, group_idx and no kv_cache_spec_kind. It is a tier-only
// store at the endpoint's block size: the known block gains the tier, and
// the group keeps the kind its stores taught.
func TestApplyOffloadPlaceholder(t *testing.T) {
	f := newApplyFixture(t)
	f.applyHex(testEndpoint, vector(t, "V1/current"))
	ph := wire.Event{Type: wire.EventBlockStored, BlockHashes: []uint64{wiretest.H1}, Medium: "CPU",
		HasGroup: true, Locality: "LOCAL"}
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, ph), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 1}, res)
	m := f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{})
	require.Equal(t, 2, m.GPU)
	require.Equal(t, 1, m.CPU)
	require.Equal(t, 0.0, skipped(t, f.reg, "", skipInvalidBlockSize))

	rm := wiretest.RemovedH(wiretest.H1)
	rm.Medium = "CPU"
	require.Equal(t, 1, f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, rm), wire.FormatVLLM).RemovedBlocks)
	m = f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{})
	require.Equal(t, 2, m.GPU)
	require.Zero(t, m.CPU)
}

// TestApplyOffloadPlaceholderNonPrefixGroup: vLLM sends placeholders for
// sliding-window groups too. The group keeps the kind its stores taught
// (a placeholder names none) and the placeholder is skipped as a store of
// that kind, so the group's later removals are still the group's.
func TestApplyOffloadPlaceholderNonPrefixGroup(t *testing.T) {
	f := newApplyFixture(t)
	f.applyHex(testEndpoint, vector(t, "V1/current"))
	swa := wiretest.StoredV1()
	swa.Group, swa.Kind, swa.SlidingWindow, swa.HasSlidingWindow = 1, "sliding_window", 8, true
	require.Equal(t, 1, f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, swa), wire.FormatVLLM).Stored)
	ph := wire.Event{Type: wire.EventBlockStored, BlockHashes: []uint64{wiretest.H1}, Medium: "CPU", Group: 1, HasGroup: true}
	require.Equal(t, ApplyResult{Skipped: 1, SkippedBlocks: 1}, f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, ph), wire.FormatVLLM))
	require.Equal(t, 1.0, skipped(t, f.reg, "sliding_window", kvindex.ReasonNonPrefixKind))
	require.Equal(t, "sliding_window", f.a.state(testEndpoint).groups[1], "the placeholder did not unlearn the group's kind")
}

// TestApplySelfDescribingOffloadKeepsKeys: vLLM's self-describing
// offloading events repeat a chunk's hashes, parent, tokens and LoRA name
// but no extra keys (vllm/distributed/kv_transfer/kv_connector/v1/
// offloading/events.py, _build_event_metadata: extra_keys=None). Keyed
// anew from their tokens, a salted block's CPU copy would replace the
// block's salted key with the unsalted one: the salted request would lose
// its match and an unsalted one would match content it never had. Hashes
// the endpoint already maps keep their key and gain the tier.
func TestApplySelfDescribingOffloadKeepsKeys(t *testing.T) {
	f := newApplyFixture(t)
	f.applyHex(testEndpoint, vector(t, "V8/current")) // salt-A in block 0's extra keys
	salted := kvindex.KeyParams{CacheSalt: "salt-A"}
	require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 8), salted).Blocks)

	e := wiretest.WantV8().Events[0]
	e.Medium, e.ExtraKeys, e.Ownership = "CPU", nil, "lmcache"
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, e), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 2}, res)
	m := f.match(testEndpoint, wiretest.TokensRange(1, 8), salted)
	require.Equal(t, 2, m.GPU)
	require.Equal(t, 2, m.CPU)
	require.Zero(t, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks,
		"an unsalted request never held these blocks")
}
