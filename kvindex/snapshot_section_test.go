package kvindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	rtmetrics "runtime/metrics"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"
)

// paddedSection streams a section body of n bytes, head followed by zeros,
// without holding it: the reader under test is the only one to buffer it.
type paddedSection struct {
	head []byte
	off  int64
	n    int64
}

func (p *paddedSection) Read(b []byte) (int, error) {
	if p.off == p.n {
		return 0, io.EOF
	}
	k := int(min(int64(len(b)), p.n-p.off))
	b = b[:k]
	clear(b)
	if p.off < int64(len(p.head)) {
		copy(b, p.head[p.off:])
	}
	p.off += int64(k)
	return k, nil
}

// heapObjects reads the bytes of live and not yet swept heap objects.
func heapObjects() uint64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// A section that declares and sends N bytes costs the reader N bytes plus
// a constant, not the 2-4 N of a buffer that doubles as the bytes arrive
// (which peaked at 3.5 N of heap). The bound checked is the bytes allocated
// while reading it, which unlike a sampled peak does not depend on when
// the collector runs; the sampled peak is logged.
func TestSnapshotSectionCostsItsSize(t *testing.T) {
	const n = 64 << 20
	head := body(uv(3), []byte("a:1"), uv(0), uv(0), uv(0)) // no position, tiers or entries
	frame := []byte{snapTagSection, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(frame[1:], n)
	d := xxhash.New()
	_, _ = d.Write(frame)
	_, err := io.Copy(d, &paddedSection{head: head, n: n})
	require.NoError(t, err)
	input := func() io.Reader {
		return io.MultiReader(
			bytes.NewReader(forgeSection(nil, 0, 0)[:snapHeaderLen]),
			bytes.NewReader(frame),
			&paddedSection{head: head, n: n},
			bytes.NewReader(binary.LittleEndian.AppendUint64(nil, d.Sum64())),
		)
	}
	ix := newTestIndex(t, Config{})

	runtime.GC()
	base := heapObjects()
	var peak uint64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, heapObjects())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var before, after runtimeMem
	before.read()
	_, err = ix.ReadSnapshot(input(), SnapshotReadOptions{MaxSectionBytes: n})
	after.read()
	close(stop)
	<-sampled
	require.ErrorIs(t, err, ErrSnapshotMalformed, "the padding after the entries is refused once the checksum matched")
	require.ErrorContains(t, err, "bytes after the entries")
	allocated := after.total - before.total
	t.Logf("section of %d MiB: %.1f MiB allocated (%.2f N), sampled peak heap above the start %.1f MiB (%.2f N)",
		n>>20, float64(allocated)/(1<<20), float64(allocated)/n, float64(peak-min(peak, base))/(1<<20), float64(peak-min(peak, base))/n)
	require.LessOrEqual(t, allocated, uint64(n+n/2+4<<20), "bytes allocated reading one section of N bytes: at most 1.5 N + 4 MiB")
}

// A body held in pieces of any size parses exactly as one held whole:
// every snapshot of the round-trip test and every bounds case gives the
// same index or the same refusal with pieces of 1 to 9 bytes, so values
// cut by a piece's end (varints, names, positions, hashes) are read whole.
func TestSnapshotSectionPieces(t *testing.T) {
	warm := newTestIndex(t, Config{})
	warmSnapIndex(t, warm)
	var buf bytes.Buffer
	_, err := warm.WriteSnapshot(&buf)
	require.NoError(t, err)
	name := body(uv(3), []byte("a:1"))
	gpu := body(uv(1), uv(3), []byte("gpu"))
	entry := body(u64(7), u64(9), uv(1), []byte{0}, uv(1), uv(1))
	inputs := map[string][]byte{
		"warm":                buf.Bytes(),
		"position":            forgeSection(body(name, uv(4), []byte("pos"), gpu, uv(1), entry), 1, 1),
		"bad varint":          forgeSection(body(name, uv(0), bytes.Repeat([]byte{0xff}, 11)), 0, 0),
		"cut inside entry":    forgeSection(body(name, uv(0), gpu, uv(1), entry[:10]), 0, 0),
		"bytes after entries": forgeSection(body(name, uv(0), gpu, uv(1), entry, []byte{0}), 1, 1),
		"tier reference":      forgeSection(body(name, uv(0), gpu, uv(1), u64(7), u64(9), uv(1), []byte{1}, uv(1), uv(1)), 0, 0),
	}
	for what, data := range inputs {
		t.Run(what, func(t *testing.T) {
			whole := newTestIndex(t, Config{})
			_, wantErr := whole.ReadSnapshot(bytes.NewReader(data), SnapshotReadOptions{})
			want := dumpIndex(whole)
			for piece := 1; piece <= 9; piece++ {
				ix := newTestIndex(t, Config{})
				_, err := ix.ReadSnapshot(bytes.NewReader(data), SnapshotReadOptions{pieceMax: piece})
				if wantErr == nil {
					require.NoError(t, err, "pieces of %d bytes", piece)
				} else {
					require.EqualError(t, err, wantErr.Error(), "pieces of %d bytes", piece)
				}
				require.Equal(t, want, dumpIndex(ix), "pieces of %d bytes", piece)
			}
		})
	}
}

// The pieces grow from snapPieceMin to snapPieceMax, so that a short
// section takes one small piece and a long one wastes less than one piece.
func TestSnapshotSectionPieceSizes(t *testing.T) {
	var b sectionBuf
	require.Equal(t, snapPieceMin, b.pieceSize(0))
	require.Equal(t, 2*snapPieceMin, b.pieceSize(1))
	require.Equal(t, snapPieceMax, b.pieceSize(10))
	require.Equal(t, snapPieceMax, b.pieceSize(1000))
	b.max = 3
	require.Equal(t, 3, b.pieceSize(0))
	require.Equal(t, 3, b.pieceSize(5))

	// A body cut short reports io.EOF with what arrived.
	got, err := b.read(bytes.NewReader([]byte("abcde")), 8, xxhash.New())
	require.True(t, errors.Is(err, io.EOF))
	require.EqualValues(t, 5, got)
	c := b.cursor()
	require.Equal(t, "abcde", string(c.bytes("all", 5)), "read across pieces of 3 bytes")
	require.Zero(t, c.left)
}
