package wire_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/shamaton/msgpack/v2"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// retainedBytes estimates the memory a decoded batch holds on to.
func retainedBytes(b *wire.Batch) int {
	n := cap(b.Events)*int(unsafe.Sizeof(wire.Event{})) + wire.ArenaCap(b)
	all := b.Events[:cap(b.Events)]
	for i := range all {
		e := &all[i]
		n += cap(e.BlockHashes)*8 + cap(e.RawHashes)*24 + cap(e.TokenIDs)*4 + cap(e.ExtraKeys)*24
		for _, k := range e.ExtraKeys[:cap(e.ExtraKeys)] {
			n += cap(k) * int(unsafe.Sizeof(wire.ExtraKey{}))
			for _, x := range k {
				n += len(x.Value)
			}
		}
		n += len(e.Medium) + len(e.LoRAName) + len(e.Kind) + len(e.CacheSalt)
	}
	return n
}

// maxRetainedPerInputByte bounds memory per payload byte: the worst case is
// a list of one-byte extra keys, each becoming a 32-byte ExtraKey, doubled
// by append growth.
const maxRetainedPerInputByte = 96

// FuzzDecode feeds arbitrary payloads to the decoder. It must never panic,
// must fail only with a *DecodeError, must not retain memory out of
// proportion to the input, and whatever it accepts must survive a
// re-encode/decode cycle unchanged. The seed corpus in
// testdata/fuzz/FuzzDecode holds every golden payload of wiretest.Vectors.
func FuzzDecode(f *testing.F) {
	d := wire.NewDecoder(wire.Limits{})
	var reused wire.Batch
	f.Fuzz(func(t *testing.T, payload []byte) {
		var fresh wire.Batch
		err := d.Decode(payload, &fresh)
		errReused := d.Decode(payload, &reused)
		if (err == nil) != (errReused == nil) {
			t.Fatalf("fresh and reused batches disagree: %v / %v", err, errReused)
		}
		if err != nil {
			var de *wire.DecodeError
			if !errors.As(err, &de) || !(errors.Is(err, wire.ErrTruncated) || errors.Is(err, wire.ErrMalformed) || errors.Is(err, wire.ErrLimit)) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if len(fresh.Events) != 0 || len(reused.Events) != 0 {
				t.Fatal("events left in a batch after an error")
			}
			return
		}
		if got, max := retainedBytes(&fresh), maxRetainedPerInputByte*len(payload)+4096; got > max {
			t.Fatalf("decoding %d bytes retained %d bytes (max %d)", len(payload), got, max)
		}
		for _, f := range []wire.Format{wire.FormatVLLM, wire.FormatVLLMLegacy, wire.FormatVLLMMapBatch} {
			enc := wire.AppendBatch(nil, &fresh, f)
			var again wire.Batch
			if err := d.Decode(enc, &again); err != nil {
				t.Fatalf("%v: re-encoded batch does not decode: %v", f, err)
			}
			requireSameBatch(t, &fresh, &again, f)
		}
		var sg wire.Batch
		if err := d.Decode(wire.AppendBatch(nil, &fresh, wire.FormatSGLang), &sg); err != nil {
			t.Fatalf("sglang re-encode does not decode: %v", err)
		}
		if err := d.Decode(wire.AppendBatch(nil, &fresh, wire.FormatTRTLLM), &sg); err != nil {
			t.Fatalf("trtllm re-encode does not decode: %v", err)
		}
		if err := d.Decode(wire.AppendBatch(nil, &fresh, wire.FormatSGLangMap), &sg); err != nil {
			t.Fatalf("sglang-map re-encode does not decode: %v", err)
		}
		if h, err := wire.PeekHeader(payload); err != nil || h.HasPublisherID != fresh.HasPublisherID ||
			h.PublisherID != fresh.PublisherID || h.Events != len(fresh.Events)+fresh.UnknownEvents {
			t.Fatalf("PeekHeader disagrees with Decode: %+v, %v", h, err)
		}
	})
}

// requireSameBatch compares what a format can carry.
func requireSameBatch(t *testing.T, want, got *wire.Batch, f wire.Format) {
	t.Helper()
	carriesID := f == wire.FormatVLLM || f == wire.FormatVLLMMapBatch
	if carriesID && (want.HasPublisherID != got.HasPublisherID || want.PublisherID != got.PublisherID) {
		t.Fatalf("%v: publisher identity changed", f)
	}
	if math.Float64bits(want.TS) != math.Float64bits(got.TS) || want.HasDPRank != got.HasDPRank ||
		(want.HasDPRank && want.DPRank != got.DPRank) || got.UnknownEvents != 0 || len(want.Events) != len(got.Events) {
		t.Fatalf("%v: batch header or event count changed", f)
	}
	for i := range want.Events {
		w := canon(want.Events[i])
		w.InvalidTokens, w.InvalidTokenAt, w.CacheSalt = false, 0, "" // not carried by vLLM layouts
		if f == wire.FormatVLLMLegacy {                               // the all-array layout predates these
			w.Locality, w.Ownership, w.SessionID = "", "", ""
		}
		if w.Type != wire.EventBlockStored {
			w = wire.Event{Type: w.Type, BlockHashes: w.BlockHashes, RawHashes: w.RawHashes,
				SignedHashes: w.SignedHashes, Medium: w.Medium, Group: w.Group, HasGroup: w.HasGroup,
				Locality: w.Locality, Ownership: w.Ownership}
			if w.Type == wire.EventAllBlocksCleared {
				w = wire.Event{Type: w.Type}
			}
		}
		g := canon(got.Events[i])
		require.Equal(t, w, g, "%v: event %d", f, i)
	}
}

// TestFuzzCorpusHoldsGoldenVectors checks that the committed seed corpus
// holds every golden vector, so `go test` replays them through FuzzDecode.
// Run with KVEVENTS_WRITE_CORPUS=1 to (re)write the golden seed files.
func TestFuzzCorpusHoldsGoldenVectors(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if os.Getenv("KVEVENTS_WRITE_CORPUS") == "1" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, v := range wiretest.Vectors() {
			name := "golden-" + strings.ReplaceAll(v.Name, "/", "-")
			data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", wiretest.MustHex(t, v.Hex))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
		}
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var corpus [][]byte
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		require.Len(t, lines, 2, e.Name())
		require.Equal(t, "go test fuzz v1", lines[0])
		arg := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
		payload, err := strconv.Unquote(arg)
		require.NoError(t, err, e.Name())
		corpus = append(corpus, []byte(payload))
	}
	for _, v := range wiretest.Vectors() {
		want := wiretest.MustHex(t, v.Hex)
		found := false
		for _, c := range corpus {
			found = found || bytes.Equal(c, want)
		}
		require.True(t, found, "seed corpus lacks %s", v.Name)
	}
}

// fuzzSeeds reads the seed corpus of the fuzz target name, by file name.
func fuzzSeeds(t *testing.T, name string) map[string][]byte {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", name)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	seeds := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		require.Len(t, lines, 2, e.Name())
		payload, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		require.NoError(t, err, e.Name())
		seeds[e.Name()] = []byte(payload)
	}
	return seeds
}

// TestFuzzCorpusCoversRealShapes: every seed of FuzzDecode is a payload
// the decoder accepts (a rejected seed only exercises the error path, not
// the shape it is named for), and together they hold the shapes engines
// send beyond the golden vectors: a hybrid model's sliding-window and
// Mamba stores in map and array events, vLLM's offloading placeholder
// store (no tokens, block_size 0, medium CPU), SGLang's vLLM-aligned
// positional layout with its salt in the 15th element, and the map-shaped
// batch with a publisher identity.
func TestFuzzCorpusCoversRealShapes(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	have := map[string]bool{}
	for name, payload := range fuzzSeeds(t, "FuzzDecode") {
		var b wire.Batch
		require.NoError(t, d.Decode(payload, &b), "seed %s", name)
		var generic any
		require.NoError(t, msgpack.Unmarshal(payload, &generic), "seed %s", name)
		form := "array"
		if _, ok := generic.(map[any]any); ok {
			form = "map-batch"
		} else if evs, ok := generic.([]any)[1].([]any); ok && len(evs) > 0 {
			if _, ok := evs[0].(map[any]any); ok {
				form = "map"
			}
		}
		if b.HasPublisherID {
			have["identity/"+form] = true
		}
		for _, e := range b.Events {
			switch {
			case e.HasSlidingWindow && e.Kind == "sliding_window":
				have["sliding-window/"+form] = true
			case e.Kind == "mamba":
				have["mamba/"+form] = true
			case e.Type == wire.EventBlockStored && len(e.TokenIDs) == 0 && e.BlockSize == 0 && e.Medium == "CPU":
				have["placeholder/"+form] = true
			case e.CacheSalt != "" && len(e.ExtraKeys) > 0:
				have["salt-and-extra-keys/"+form] = true
			}
		}
	}
	for _, want := range []string{"sliding-window/map", "sliding-window/array", "mamba/map", "mamba/array",
		"placeholder/map", "salt-and-extra-keys/array", "identity/array", "identity/map-batch"} {
		require.True(t, have[want], "no seed holds %s (have %v)", want, have)
	}
}
