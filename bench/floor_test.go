package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"testing"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// The floors are the least work a benchmark's operation could possibly do,
// built from plain Go maps and one hash pass, measured in the same run as
// the real benchmarks so that the report can quote ratios (absolute times
// on shared machines vary 2–3× between runs; ratios much less).

// floorEntries is the size of the floors' maps: the warm index's order of
// magnitude.
const floorEntries = 1 << 20

// floorKey spreads i over the key space like router keys (a bijective mix).
func floorKey(i uint64) uint64 {
	x := i*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E5
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	return x ^ x>>29
}

// floorMatch builds the FloorMatch fixture and returns one operation and a
// check of its last result. steps gives, for each of the 64 candidates,
// how many leading blocks of the 32-block prompt it holds (0: none), so
// that the floor computes the same answer as the Match it is the floor of;
// entries is the map's size (floorEntries, or the block count of the index
// the Match runs on).
func floorMatch(steps []int, entries int) (op func(), check func() error) {
	const blocks, cands = 32, 64
	if len(steps) != cands {
		panic(fmt.Sprintf("bench: floorMatch wants %d candidates' steps, got %d", cands, len(steps)))
	}
	m := make(map[uint64]uint64, entries)
	for i := uint64(0); len(m) < entries-blocks; i++ {
		m[floorKey(i)] = 1 << (i % cands)
	}
	keys := make([]uint64, blocks)
	for k := range keys {
		keys[k] = floorKey(uint64(entries + k))
		var mask uint64
		for c, s := range steps {
			if s > k {
				mask |= 1 << c
			}
		}
		m[keys[k]] = mask
	}
	var blk [cands]int32
	op = func() {
		alive := ^uint64(0)
		k := 0
		for ; k < len(keys) && alive != 0; k++ {
			pres, ok := m[keys[k]]
			if !ok {
				break
			}
			for died := alive &^ pres; died != 0; died &= died - 1 {
				blk[bits.TrailingZeros64(died)] = int32(k)
			}
			alive &= pres
		}
		for ; alive != 0; alive &= alive - 1 {
			blk[bits.TrailingZeros64(alive)] = int32(k)
		}
	}
	check = func() error {
		for c, s := range steps {
			if int(blk[c]) != s {
				return fmt.Errorf("candidate %d: %d blocks, want %d", c, blk[c], s)
			}
		}
		return nil
	}
	return op, check
}

// BenchmarkFloorMatch is the floor of Match/tokens=2048/endpoints=64: 32
// lookups in a map of 2^20 keys to 64-bit endpoint masks (what an index
// limited to 64 endpoints, with no tiers, groups or speculation, would
// store), each ANDed into the alive set, recording where each candidate's
// contiguous prefix ends. The masks form the same staircase as the Match
// benchmark (candidate i holds Steps(64, 32)[i] blocks).
func BenchmarkFloorMatch(b *testing.B) {
	op, check := floorMatch(Steps(64, 32), floorEntries)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		op()
	}
	b.StopTimer()
	if err := check(); err != nil {
		b.Fatal(err)
	}
	perBlock(b, 32)
}

// tokenBytes views tokens as their little-endian bytes (amd64, arm64).
func tokenBytes(t []uint32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(t))), 4*len(t))
}

// floorHash returns the FloorHash operation and its check.
func floorHash() (op func(), check func() error) {
	buf := tokenBytes(Tokens(7, 2048))
	var sink uint64
	op = func() { sink += xxhash.Sum64(buf) }
	check = func() error {
		if sink == 0 {
			return errors.New("zero hash")
		}
		return nil
	}
	return op, check
}

// BenchmarkFloorHash is the floor of Keys/tokens=2048: one XXH64 pass over
// the same 8 KiB of token IDs, no chaining, no per-block output.
func BenchmarkFloorHash(b *testing.B) {
	op, check := floorHash()
	b.SetBytes(4 * 2048)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		op()
	}
	b.StopTimer()
	if err := check(); err != nil && b.N > 0 {
		b.Fatal(err)
	}
	perBlock(b, 32)
}

// floorApply returns the FloorApply operation (one message of 16 blocks),
// a hook to run between timed batches (it rebuilds the map when it has
// grown by 2^20 entries), the payload size and a check.
func floorApply() (op, between func(), size int, check func() error, err error) {
	const blocks, bs = 16, 64
	var batch wire.Batch
	batch.Events = []wire.Event{{
		Type: wire.EventBlockStored, TokenIDs: Tokens(1<<41, blocks*bs), BlockSize: bs,
		Medium: "GPU", HasGroup: true, Kind: "full_attention",
	}}
	for i := 0; i < blocks; i++ {
		batch.Events[0].BlockHashes = append(batch.Events[0].BlockHashes, uint64(i+1))
	}
	payload := wire.AppendBatch(nil, &batch, wire.FormatVLLM)
	// The token array: the first array header of 1,024 elements (0xdc 0x0400).
	start := -1
	for p := 0; p+3 <= len(payload); p++ {
		if payload[p] == 0xdc && payload[p+1] == 0x04 && payload[p+2] == 0x00 {
			start = p + 3
			break
		}
	}
	if start < 0 {
		return nil, nil, 0, nil, errors.New("token array not found in the payload")
	}
	enc := payload[start:]
	fill := func() map[uint64]uint64 {
		m := make(map[uint64]uint64, 2*floorEntries)
		for i := uint64(0); i < floorEntries; i++ {
			m[floorKey(i)] = i
		}
		return m
	}
	m := fill()
	next := uint64(floorEntries)
	toks := make([]uint32, blocks*bs)
	bad := 0
	op = func() {
		p := 0
		for blk := 0; blk < blocks; blk++ {
			t := toks[blk*bs : (blk+1)*bs]
			for j := range t {
				switch c := enc[p]; {
				case c <= 0x7f:
					t[j] = uint32(c)
					p++
				case c == 0xcc:
					t[j] = uint32(enc[p+1])
					p += 2
				case c == 0xcd:
					t[j] = uint32(binary.BigEndian.Uint16(enc[p+1:]))
					p += 3
				case c == 0xce:
					t[j] = binary.BigEndian.Uint32(enc[p+1:])
					p += 5
				default:
					bad++
					p++
				}
			}
			h := xxhash.Sum64(tokenBytes(t))
			m[floorKey(next)^h] = h
			next++
		}
	}
	between = func() {
		if len(m) >= 2*floorEntries-1024*blocks {
			m = fill()
		}
	}
	check = func() error {
		if bad > 0 {
			return fmt.Errorf("%d tokens in unexpected forms", bad)
		}
		for j, t := range batch.Events[0].TokenIDs {
			if toks[j] != t {
				return fmt.Errorf("token %d decoded as %d, want %d", j, toks[j], t)
			}
		}
		return nil
	}
	return op, between, len(payload), check, nil
}

// BenchmarkFloorApply is the floor of Apply/blocks=16, per message of 16
// blocks: for each block, decode its 64 msgpack-encoded token IDs (the
// bytes of a real current-vLLM payload, in whatever forms the encoder
// chose), one XXH64 of the block's 256 bytes of tokens, and one insert into
// a map of 2^20 entries. The map is rebuilt outside the timer whenever it
// has grown by about 2^20 entries, so it always holds 1–2 × 2^20.
func BenchmarkFloorApply(b *testing.B) {
	op, between, size, check, err := floorApply()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%1024 == 0 {
			b.StopTimer()
			between()
			b.StartTimer()
		}
		op()
	}
	b.StopTimer()
	if err := check(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)*16/b.Elapsed().Seconds(), "blocks/s")
}
