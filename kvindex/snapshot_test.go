package kvindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dumpEntry is one engine-hash entry of an endpoint with its block's pairs,
// tiers by name, in the index's order.
type dumpEntry struct {
	Hash  uint64
	Key   Key
	Pairs string
}

// dumpIndex describes every endpoint's entries and position exactly, for
// comparing two indexes.
func dumpIndex(ix *Index) map[string][]dumpEntry {
	out := map[string][]dumpEntry{}
	names := ix.snapEndpointNames()
	tiers := ix.snapTierNames()
	for _, name := range names {
		var d []dumpEntry
		if pos, ok := ix.Position(name); ok {
			d = append(d, dumpEntry{Pairs: "pos=" + string(pos)})
		}
		ep, _ := ix.lockEndpoint(name, false)
		if ep != nil {
			ix.snapEntries(ep, func(h uint64, key Key, pairs []pair) {
				ps := make([]string, 0, len(pairs))
				for _, p := range pairs {
					ps = append(ps, fmt.Sprintf("%s/%d×%d", tiers[p.tier], p.group, p.count))
				}
				slices.Sort(ps)
				d = append(d, dumpEntry{Hash: h, Key: key, Pairs: strings.Join(ps, ",")})
			})
			ep.mu.Unlock()
		}
		d = append(d, dumpGroups(ix, name)...)
		if len(d) > 0 {
			out[name] = d
		}
	}
	return out
}

// dumpGroups describes endpoint's non-prefix groups exactly: one entry per
// group (its kind and window) and one per engine hash it holds.
func dumpGroups(ix *Index, name string) []dumpEntry {
	hy, ok := ix.hybrid.Load(name)
	if !ok {
		return nil
	}
	hy.mu.RLock()
	defer hy.mu.RUnlock()
	groups := slices.Clone(hy.groups)
	slices.SortFunc(groups, func(a, b *groupSet) int { return int(a.group) - int(b.group) })
	var d []dumpEntry
	for _, g := range groups {
		d = append(d, dumpEntry{Pairs: fmt.Sprintf("group %d kind %d window %d holds %d keys", g.group, g.kind, g.window, len(g.held))})
		hs := make([]uint64, 0, len(g.byHash))
		for h := range g.byHash {
			hs = append(hs, h)
		}
		slices.Sort(hs)
		for _, h := range hs {
			r := g.byHash[h]
			d = append(d, dumpEntry{Hash: h, Key: r.key, Pairs: fmt.Sprintf("group %d ×%d", g.group, r.n)})
		}
	}
	return d
}

// warmSnapIndex fills an index with the cases a snapshot must carry: shared and
// private chains over several endpoints, LoRA roots, extra keys, CPU and
// custom tiers, groups, reference counts above the compact form, a remapped
// engine hash and speculative entries (which must not survive).
func warmSnapIndex(t *testing.T, ix *Index) {
	t.Helper()
	sys := seq(1, 16) // a shared "system prompt" of 4 blocks
	for e := 0; e < 5; e++ {
		ep := fmt.Sprintf("10.0.0.%d:8000", e+1)
		require.NoError(t, ix.Store(ep, storeEv("m", 100, sys)))
		tail := withParent(storeEv("m", 1000+uint64(e)*10, seq(100+e*8, 8)), 103)
		require.NoError(t, ix.Store(ep, tail))
		pos := LockPositionForTest(ix, ep)
		pos.Set([]byte(fmt.Sprintf("seq=%d", e*7)))
		pos.Unlock()
	}
	a := "10.0.0.1:8000"
	require.NoError(t, ix.Store(a, storeEv("m", 100, sys))) // GPU count 2: complex membership
	cpu := storeEv("m", 100, nil)
	cpu.EngineHashes, cpu.Tier = []uint64{100, 101}, "CPU"
	require.NoError(t, ix.Store(a, cpu))
	disk := storeEv("m", 100, nil)
	disk.EngineHashes, disk.Tier, disk.Group = []uint64{100}, "nvme-pool", 3
	require.NoError(t, ix.Store(a, disk))
	lora := storeEv("m", 5000, seq(1, 8))
	lora.Model, lora.ExtraKeys = "my-lora", [][]string{{"img-1"}, nil}
	require.NoError(t, ix.Store("10.0.0.2:8000", lora))
	ug := storeEv("m", 6000, seq(50, 4))
	ug.Group = -1
	require.NoError(t, ix.Store("10.0.0.3:8000", ug))
	// Remap: engine hash 6000 now names other content.
	require.NoError(t, ix.Store("10.0.0.3:8000", storeEv("other", 6000, seq(60, 4))))
	ix.Speculate("10.0.0.4:8000", Keys(nil, seq(900, 16), testBS, &KeyParams{Model: "m"}), time.Hour)
	ix.Speculate("10.0.0.9:8000", Keys(nil, seq(900, 16), testBS, &KeyParams{Model: "m"}), time.Hour)
	// A position without entries: an endpoint whose stream only cleared.
	pos := ix.LockPosition("10.0.0.8:8000")
	pos.Set([]byte("seq=42"))
	pos.Unlock()
}

// LockPositionForTest is LockPosition (kept separate so tests read as the
// event subscriber would use the lock).
func LockPositionForTest(ix *Index, ep string) *PositionLock { return ix.LockPosition(ep) }

// withoutSpec is the dump a snapshot must reproduce: speculative-only
// endpoints and entries dropped.
func withoutSpec(d map[string][]dumpEntry) map[string][]dumpEntry {
	delete(d, "10.0.0.9:8000") // speculation only
	return d
}

func TestSnapshotRoundTripExact(t *testing.T) {
	src := newTestIndex(t, Config{})
	warmSnapIndex(t, src)
	// A prompt four endpoints hold in the GPU tier alone: implicit member
	// arrays.
	for e := 2; e <= 5; e++ {
		require.NoError(t, src.Store(fmt.Sprintf("10.0.0.%d:8000", e), storeEv("m", 7000, seq(300, 12))))
	}
	want := withoutSpec(dumpIndex(src))
	var buf bytes.Buffer
	winfo, err := src.WriteSnapshot(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), winfo.Bytes)

	dst := newTestIndex(t, Config{})
	rinfo, err := dst.ReadSnapshot(bytes.NewReader(buf.Bytes()), SnapshotReadOptions{})
	require.NoError(t, err)
	require.Equal(t, winfo.Endpoints, rinfo.Endpoints)
	require.Equal(t, winfo.Memberships, rinfo.Memberships)
	require.Equal(t, want, dumpIndex(dst))
	// They are implicit member arrays in both.
	implicitKeys := func(ix *Index) (keys []Key) {
		ix.blocks.Range(func(k Key, v blockVal) bool {
			if v.implicit() {
				keys = append(keys, k)
			}
			return true
		})
		slices.Sort(keys)
		return keys
	}
	require.Len(t, implicitKeys(src), 3)
	require.Equal(t, implicitKeys(src), implicitKeys(dst))

	// Stats agree except for the speculative memberships, which are gone.
	ss, ds := src.Stats(), dst.Stats()
	require.Equal(t, 0, ds.Speculative)
	require.Equal(t, ss.Memberships-ss.Speculative, ds.Memberships)

	// Requests match identically (speculation aside).
	cands := []string{"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000", "10.0.0.5:8000"}
	for _, toks := range [][]uint32{seq(1, 16), append(seq(1, 16), seq(100, 8)...), seq(60, 4)} {
		require.Equal(t, blocksOf(match(src, "m", toks, cands...)), blocksOf(match(dst, "m", toks, cands...)))
	}
	lk := Keys(nil, seq(1, 8), testBS, &KeyParams{LoRA: "my-lora", MM: []MMItem{{Hash: "img-1", Offset: 0, Length: 2}}})
	var a, b MatchResult
	src.Match(lk, cands, &a)
	dst.Match(lk, cands, &b)
	require.Equal(t, a.Endpoints(), b.Endpoints())
	require.Equal(t, 2, b.Endpoints()[1].Blocks)

	// The restored index keeps working as the original: removals honour
	// the restored reference counts (two GPU copies need two removals).
	for _, ix := range []*Index{src, dst} {
		ix.Remove("10.0.0.1:8000", []uint64{100}, "gpu", 0)
		require.Equal(t, 4, match(ix, "m", seq(1, 16), "10.0.0.1:8000").Endpoints()[0].Blocks)
	}
	require.Equal(t, withoutSpec(dumpIndex(src)), dumpIndex(dst))

	// Writing the restored index again gives the same bytes.
	var again bytes.Buffer
	_, err = dst.WriteSnapshot(&again)
	require.NoError(t, err)
	var orig bytes.Buffer
	src.Clear("10.0.0.9:8000")
	src.Clear("10.0.0.4:8000")
	dst.Clear("10.0.0.4:8000")
	_, err = src.WriteSnapshot(&orig)
	require.NoError(t, err)
	again.Reset()
	_, err = dst.WriteSnapshot(&again)
	require.NoError(t, err)
	require.Equal(t, orig.Bytes(), again.Bytes())
}

func TestSnapshotEmptyIndex(t *testing.T) {
	var buf bytes.Buffer
	info, err := newTestIndex(t, Config{}).WriteSnapshot(&buf)
	require.NoError(t, err)
	require.Empty(t, info.Endpoints)
	dst := newTestIndex(t, Config{})
	_, err = dst.ReadSnapshot(&buf, SnapshotReadOptions{})
	require.NoError(t, err)
	require.Equal(t, Stats{}, dst.Stats())
}

// snapshotBytes returns the snapshot of a warm index.
func snapshotBytes(t testing.TB, cfg Config) []byte {
	ix, err := New(Config{BlockSize: testBS, SweepInterval: -1, MaxBlocksPerEndpoint: cfg.MaxBlocksPerEndpoint}, Options{})
	require.NoError(t, err)
	defer ix.Close()
	if tt, ok := t.(*testing.T); ok {
		warmSnapIndex(tt, ix)
	}
	var buf bytes.Buffer
	_, err = ix.WriteSnapshot(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// requireRefused checks that ReadSnapshot refuses data with sentinel and
// leaves the index empty.
func requireRefused(t *testing.T, data []byte, sentinel error) {
	t.Helper()
	ix := newTestIndex(t, Config{})
	_, err := ix.ReadSnapshot(bytes.NewReader(data), SnapshotReadOptions{})
	require.ErrorIs(t, err, sentinel)
	var se *SnapshotError
	require.ErrorAs(t, err, &se)
	require.Equal(t, snapReason(sentinel), se.Reason)
	require.Equal(t, Stats{Memberships: 0}, withoutEvictions(ix.Stats()), "a refused snapshot leaves nothing behind")
	require.Empty(t, dumpIndex(ix))
}

func withoutEvictions(s Stats) Stats {
	s.EndpointRemovals = 0
	return s
}

func TestSnapshotTruncatedEverywhere(t *testing.T) {
	data := snapshotBytes(t, Config{})
	for n := 0; n < len(data); n++ {
		ix := newTestIndex(t, Config{})
		_, err := ix.ReadSnapshot(bytes.NewReader(data[:n]), SnapshotReadOptions{})
		require.ErrorIs(t, err, ErrSnapshotTruncated, "cut at %d of %d", n, len(data))
		require.Empty(t, dumpIndex(ix), "cut at %d: nothing of a truncated snapshot stays", n)
		require.Zero(t, ix.Stats().Memberships)
	}
}

func TestSnapshotCorruptEverywhere(t *testing.T) {
	data := snapshotBytes(t, Config{})
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x40
		ix := newTestIndex(t, Config{})
		_, err := ix.ReadSnapshot(bytes.NewReader(bad), SnapshotReadOptions{})
		require.Error(t, err, "flipped byte %d", i)
		var se *SnapshotError
		require.ErrorAs(t, err, &se)
		require.Empty(t, dumpIndex(ix), "flipped byte %d", i)
	}
}

// resum rewrites the header checksum after an edit.
func resum(hdr []byte) {
	binary.LittleEndian.PutUint64(hdr[20:], xxh64(hdr[:20]))
}

func TestSnapshotHeaderMismatches(t *testing.T) {
	data := snapshotBytes(t, Config{})
	edit := func(f func(b []byte)) []byte {
		b := bytes.Clone(data)
		f(b)
		resum(b)
		return b
	}
	requireRefused(t, []byte("not a snapshot at all, just text here"), ErrSnapshotMagic)
	requireRefused(t, edit(func(b []byte) { binary.LittleEndian.PutUint16(b[8:], SnapshotFormatVersion+1) }), ErrSnapshotVersion)
	requireRefused(t, edit(func(b []byte) { binary.LittleEndian.PutUint16(b[8:], 0) }), ErrSnapshotVersion)
	requireRefused(t, edit(func(b []byte) { binary.LittleEndian.PutUint32(b[16:], 1) }), ErrSnapshotVersion)
	requireRefused(t, edit(func(b []byte) { binary.LittleEndian.PutUint16(b[10:], KeySchemeVersion+1) }), ErrSnapshotKeyScheme)
	requireRefused(t, edit(func(b []byte) { binary.LittleEndian.PutUint32(b[12:], 64) }), ErrSnapshotBlockSize)
	bad := bytes.Clone(data)
	bad[12] ^= 1 // block size changed without fixing the checksum
	requireRefused(t, bad, ErrSnapshotChecksum)
	requireRefused(t, append(bytes.Clone(data), 0), ErrSnapshotMalformed)

	// A real index with another block size.
	other := newTestIndex(t, Config{BlockSize: 16})
	_, err := other.ReadSnapshot(bytes.NewReader(data), SnapshotReadOptions{})
	require.ErrorIs(t, err, ErrSnapshotBlockSize)
	require.Contains(t, err.Error(), "block size 4, this index uses 16")
}

// forgeSection builds a snapshot whose one section is body, with valid
// checksums, so that only the section's contents can be refused.
func forgeSection(body []byte, entries, members uint64) []byte {
	return forgeSectionV(body, entries, members, snapFormatV1)
}

// forgeSectionV is forgeSection in format version v (2: the body ends with
// the groups part).
func forgeSectionV(body []byte, entries, members uint64, v uint16) []byte {
	var b []byte
	hdr := make([]byte, snapHeaderLen)
	copy(hdr, snapMagic)
	binary.LittleEndian.PutUint16(hdr[8:], v)
	binary.LittleEndian.PutUint16(hdr[10:], KeySchemeVersion)
	binary.LittleEndian.PutUint32(hdr[12:], testBS)
	resum(hdr)
	b = append(b, hdr...)
	sec := []byte{snapTagSection, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(sec[1:], uint32(len(body)))
	sec = append(sec, body...)
	sec = binary.LittleEndian.AppendUint64(sec, xxh64(sec))
	b = append(b, sec...)
	tr := make([]byte, snapTrailerLen)
	tr[0] = snapTagTrailer
	binary.LittleEndian.PutUint32(tr[1:], 1)
	binary.LittleEndian.PutUint64(tr[5:], entries)
	binary.LittleEndian.PutUint64(tr[13:], members)
	binary.LittleEndian.PutUint64(tr[21:], xxh64(tr[:21]))
	return append(b, tr...)
}

func body(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
func uv(v uint64) []byte          { return binary.AppendUvarint(nil, v) }
func u64(v uint64) []byte         { return binary.LittleEndian.AppendUint64(nil, v) }

func TestSnapshotSectionBounds(t *testing.T) {
	name := body(uv(3), []byte("a:1"))
	noPos := uv(0)
	gpu := body(uv(1), uv(3), []byte("gpu"))
	entry := body(u64(7), u64(9), uv(1), []byte{0}, uv(1), uv(1))

	// The well-formed reference section loads.
	ix := newTestIndex(t, Config{})
	_, err := ix.ReadSnapshot(bytes.NewReader(forgeSection(body(name, noPos, gpu, uv(1), entry), 1, 1)), SnapshotReadOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, ix.Stats().Memberships)

	cases := map[string]struct {
		body     []byte
		sentinel error
	}{
		"huge entry count":      {body(name, noPos, gpu, uv(1<<40), entry), ErrSnapshotTooLarge},
		"entries beyond bytes":  {body(name, noPos, gpu, uv(1000), entry), ErrSnapshotMalformed},
		"name too long":         {body(uv(MaxSnapshotNameBytes+1), bytes.Repeat([]byte("x"), MaxSnapshotNameBytes+1)), ErrSnapshotMalformed},
		"empty name":            {body(uv(0), noPos, gpu, uv(0)), ErrSnapshotMalformed},
		"position too long":     {body(name, uv(MaxPositionBytes+2)), ErrSnapshotMalformed},
		"too many tiers":        {body(name, noPos, uv(9)), ErrSnapshotMalformed},
		"tier reference":        {body(name, noPos, gpu, uv(1), u64(7), u64(9), uv(1), []byte{1}, uv(1), uv(1)), ErrSnapshotMalformed},
		"zero count":            {body(name, noPos, gpu, uv(1), u64(7), u64(9), uv(1), []byte{0}, uv(1), uv(0)), ErrSnapshotMalformed},
		"too many pairs":        {body(name, noPos, gpu, uv(1), u64(7), u64(9), uv(maxSnapshotPairs+1)), ErrSnapshotMalformed},
		"bytes after entries":   {body(name, noPos, gpu, uv(1), entry, []byte{0}), ErrSnapshotMalformed},
		"cut inside entry":      {body(name, noPos, gpu, uv(1), entry[:10]), ErrSnapshotMalformed},
		"bad varint":            {body(name, noPos, bytes.Repeat([]byte{0xff}, 11)), ErrSnapshotMalformed},
		"group beyond int32":    {body(name, noPos, gpu, uv(1), u64(7), u64(9), uv(1), []byte{0}, uv(1<<31+1), uv(1)), ErrSnapshotMalformed},
		"empty tier name":       {body(name, noPos, uv(1), uv(0), uv(0)), ErrSnapshotMalformed},
		"trailer count too low": {nil, nil},
	}
	for what, c := range cases {
		t.Run(what, func(t *testing.T) {
			if c.body == nil {
				requireRefused(t, forgeSection(body(name, noPos, gpu, uv(1), entry), 0, 1), ErrSnapshotMalformed)
				return
			}
			requireRefused(t, forgeSection(c.body, 0, 0), c.sentinel)
		})
	}

	// More blocks than this index's per-endpoint capacity.
	small := newTestIndex(t, Config{MaxBlocksPerEndpoint: 2})
	three := body(name, noPos, gpu, uv(3), entry, body(u64(8), u64(10), uv(0)), body(u64(9), u64(11), uv(0)))
	_, err = small.ReadSnapshot(bytes.NewReader(forgeSection(three, 3, 1)), SnapshotReadOptions{})
	require.ErrorIs(t, err, ErrSnapshotTooLarge)

	// A section beyond the byte bound is refused from its length alone.
	_, err = newTestIndex(t, Config{}).ReadSnapshot(bytes.NewReader(snapshotBytes(t, Config{})), SnapshotReadOptions{MaxSectionBytes: 16})
	require.ErrorIs(t, err, ErrSnapshotTooLarge)
}

// A section length claiming 1 GiB on a short input allocates only what
// arrives.
func TestSnapshotForgedLengthAllocatesLittle(t *testing.T) {
	data := forgeSection(nil, 0, 0)[:snapHeaderLen]
	data = append(data, snapTagSection, 0, 0, 0, 0x3f) // ~1 GiB
	data = append(data, bytes.Repeat([]byte{1}, 100)...)
	ix := newTestIndex(t, Config{})
	allocs := testing.AllocsPerRun(5, func() {
		_, err := ix.ReadSnapshot(bytes.NewReader(data), SnapshotReadOptions{})
		require.ErrorIs(t, err, ErrSnapshotTruncated)
	})
	require.Less(t, allocs, 50.0)
	var ms1, ms2 runtimeMem
	ms1.read()
	_, _ = ix.ReadSnapshot(bytes.NewReader(data), SnapshotReadOptions{})
	ms2.read()
	require.Less(t, ms2.total-ms1.total, uint64(1<<20), "bytes allocated for a 1 GiB claim on 130 bytes")
}

func TestSnapshotConflictAndRollback(t *testing.T) {
	data := snapshotBytes(t, Config{})
	ix := newTestIndex(t, Config{})
	require.NoError(t, ix.Store("10.0.0.5:8000", storeEv("m", 1, seq(1, 4))))
	before := dumpIndex(ix)
	_, err := ix.ReadSnapshot(bytes.NewReader(data), SnapshotReadOptions{})
	require.ErrorIs(t, err, ErrSnapshotConflict)
	// The sections before the conflicting one were rolled back; the
	// endpoint the index held is untouched.
	require.Equal(t, before, dumpIndex(ix))
}

// blockingWriter blocks every Write until released.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return w.buf.Write(p)
}

// A snapshot stuck on a slow writer stops neither Match nor any endpoint's
// writes, including the endpoint whose section is being written.
func TestSnapshotDoesNotStallMatchOrWriters(t *testing.T) {
	ix := newTestIndex(t, Config{})
	warmSnapIndex(t, ix)
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := ix.WriteSnapshot(w)
		done <- err
	}()
	<-w.entered // blocked writing the header
	require.Equal(t, 4, match(ix, "m", seq(1, 16), "10.0.0.1:8000").Endpoints()[0].Blocks)
	for _, ep := range []string{"10.0.0.1:8000", "10.0.0.7:8000"} {
		pl := ix.LockPosition(ep)
		require.NoError(t, ix.Store(ep, storeEv("m", 77, seq(3000, 8))))
		pl.Set([]byte("later"))
		pl.Unlock()
	}
	close(w.release)
	require.NoError(t, <-done)
}

// Batches applied under the position lock are never split by a snapshot:
// every section holds exactly the blocks of the batches up to its position.
func TestSnapshotSectionMatchesItsPosition(t *testing.T) {
	ix := newTestIndex(t, Config{})
	const perBatch = 3
	var stop atomic.Bool
	var wg sync.WaitGroup
	for e := 0; e < 3; e++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ep := fmt.Sprintf("10.1.0.%d:8000", e)
			for n := uint64(1); !stop.Load() && n < 5000; n++ {
				pl := ix.LockPosition(ep)
				// One batch = several stores, as kvevents applies it.
				for i := uint64(0); i < perBatch; i++ {
					h := n*perBatch + i
					assert.NoError(t, ix.Store(ep, storeEv("m", h, seq(int(h)*4, 4))))
				}
				pl.Set(binary.AppendUvarint(nil, n))
				pl.Unlock()
			}
		}()
	}
	for i := 0; i < 30; i++ {
		var buf bytes.Buffer
		_, err := ix.WriteSnapshot(&buf)
		require.NoError(t, err)
		dst := newTestIndex(t, Config{})
		info, err := dst.ReadSnapshot(&buf, SnapshotReadOptions{})
		require.NoError(t, err)
		for _, se := range info.Endpoints {
			n, _ := binary.Uvarint(se.Position)
			require.Equal(t, int(n)*perBatch, se.Entries, "endpoint %s at position %d", se.Name, n)
		}
	}
	stop.Store(true)
	wg.Wait()
}

// failingReader returns its data, then err.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestSnapshotReaderError(t *testing.T) {
	data := snapshotBytes(t, Config{})
	ix := newTestIndex(t, Config{})
	boom := errors.New("connection reset by peer")
	_, err := ix.ReadSnapshot(&failingReader{data: data[:len(data)/2], err: boom}, SnapshotReadOptions{})
	require.ErrorIs(t, err, ErrSnapshotRead)
	require.ErrorIs(t, err, boom)
	require.Empty(t, dumpIndex(ix))
	_, err = ix.ReadSnapshot(io.MultiReader(bytes.NewReader(data)), SnapshotReadOptions{})
	require.NoError(t, err)
}

// A snapshot of more endpoint sections than SnapshotReadOptions.MaxEndpoints
// (default DefaultMaxSnapshotEndpoints) is refused as too large and leaves
// the index empty: a section that holds only a name and a position costs
// the index memory its byte bound does not see, so a snapshot of many of
// them (a hostile peer's) grew the reader's memory with its length.
func TestSnapshotEndpointCountIsBounded(t *testing.T) {
	src := newTestIndex(t, Config{})
	for i := range DefaultMaxSnapshotEndpoints + 1 {
		pl := src.LockPosition(fmt.Sprintf("10.%d.%d.1:8000", i>>8, i&0xff))
		pl.Set([]byte("p"))
		pl.Unlock()
	}
	var buf bytes.Buffer
	_, err := src.WriteSnapshot(&buf)
	require.NoError(t, err)

	dst := newTestIndex(t, Config{})
	_, err = dst.ReadSnapshot(bytes.NewReader(buf.Bytes()), SnapshotReadOptions{})
	require.ErrorIs(t, err, ErrSnapshotTooLarge, "the default bound")
	_, ok := dst.Position("10.0.0.1:8000")
	require.False(t, ok, "a refused snapshot leaves the index empty")

	info, err := dst.ReadSnapshot(bytes.NewReader(buf.Bytes()), SnapshotReadOptions{MaxEndpoints: DefaultMaxSnapshotEndpoints + 1})
	require.NoError(t, err, "a raised bound loads it")
	require.Len(t, info.Endpoints, DefaultMaxSnapshotEndpoints+1)

	_, err = newTestIndex(t, Config{}).ReadSnapshot(bytes.NewReader(buf.Bytes()), SnapshotReadOptions{MaxEndpoints: 2})
	var se *SnapshotError
	require.ErrorAs(t, err, &se)
	require.Equal(t, SnapshotReasonTooLarge, se.Reason)
}
