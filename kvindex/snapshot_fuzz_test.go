package kvindex

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func xxh64(b []byte) uint64 { return xxhash.Sum64(b) }

// runtimeMem reads the process's cumulative heap allocation.
type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.total = ms.TotalAlloc
}

// FuzzReadSnapshot feeds arbitrary bytes to ReadSnapshot: it must never
// panic, and whatever it refuses leaves the index empty; whatever it
// accepts writes back to a snapshot that reads again to the same index.
// The seed corpus (testdata/fuzz/FuzzReadSnapshot) holds real snapshots.
func FuzzReadSnapshot(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte(snapMagic))
	f.Add(forgeSection(nil, 0, 0)[:snapHeaderLen])
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := New(Config{BlockSize: testBS, SweepInterval: -1, MaxBlocksPerEndpoint: 1 << 12}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer ix.Close()
		info, err := ix.ReadSnapshot(bytes.NewReader(data), SnapshotReadOptions{MaxSectionBytes: 1 << 20})
		if err != nil {
			if _, ok := err.(*SnapshotError); !ok {
				t.Fatalf("error %T is not a *SnapshotError: %v", err, err)
			}
			if s := ix.Stats(); s.Memberships != 0 || s.Endpoints != 0 {
				t.Fatalf("refused snapshot left %+v", s)
			}
			return
		}
		want := dumpIndex(ix)
		var buf bytes.Buffer
		if _, err := ix.WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		again, err := New(Config{BlockSize: testBS, SweepInterval: -1, MaxBlocksPerEndpoint: 1 << 12}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		info2, err := again.ReadSnapshot(&buf, SnapshotReadOptions{})
		if err != nil {
			t.Fatalf("rewritten snapshot refused: %v", err)
		}
		if len(info2.Endpoints) > len(info.Endpoints) {
			t.Fatalf("rewrite grew from %d to %d sections", len(info.Endpoints), len(info2.Endpoints))
		}
		got := dumpIndex(again)
		if len(got) != len(want) {
			t.Fatalf("rewrite has %d endpoints, want %d", len(got), len(want))
		}
	})
}

// TestWriteSnapshotFuzzSeeds regenerates the seed corpus of
// FuzzReadSnapshot when KVROUTE_WRITE_FUZZ_SEEDS=1.
func TestWriteSnapshotFuzzSeeds(t *testing.T) {
	if os.Getenv("KVROUTE_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set KVROUTE_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz/FuzzReadSnapshot")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzReadSnapshot")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	warm := snapshotBytes(t, Config{})
	empty := func() []byte {
		ix, _ := New(Config{BlockSize: testBS, SweepInterval: -1}, Options{})
		defer ix.Close()
		var b bytes.Buffer
		_, _ = ix.WriteSnapshot(&b)
		return b.Bytes()
	}()
	one := forgeSection(bytes.Join([][]byte{uv(3), []byte("a:1"), uv(4), []byte("pos"), uv(1), uv(3), []byte("gpu"),
		uv(1), u64(7), u64(9), uv(1), {0}, uv(1), uv(1)}, nil), 1, 1)
	hybrid := func() []byte {
		ix := newTestIndex(t, Config{})
		hybridSnapIndex(t, ix)
		var b bytes.Buffer
		_, _ = ix.WriteSnapshot(&b)
		return b.Bytes()
	}()
	seeds := map[string][]byte{
		"hybrid_groups":  hybrid,
		"warm":           warm,
		"empty_index":    empty,
		"one_entry":      one,
		"truncated_warm": warm[:len(warm)/2],
		"trailing_byte":  append(bytes.Clone(one), 0),
	}
	for name, data := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzSnapshotSection fuzzes one section body behind valid checksums, so
// that the fuzzer reaches the section parser and loader (random bytes
// rarely pass a checksum), in format version 1 or 2 (with the groups
// part). Whatever happens, a refused snapshot leaves the index empty.
func FuzzSnapshotSection(f *testing.F) {
	f.Add(bytes.Join([][]byte{uv(3), []byte("a:1"), uv(4), []byte("pos"), uv(1), uv(3), []byte("gpu"),
		uv(1), u64(7), u64(9), uv(1), {0}, uv(1), uv(1)}, nil), uint8(1), uint8(1), uint8(1))
	f.Add(bytes.Join([][]byte{uv(3), []byte("a:1"), uv(0), uv(2), uv(3), []byte("gpu"), uv(3), []byte("cpu"),
		uv(2), u64(7), u64(9), uv(2), {0}, uv(1), uv(2), {1}, uv(4), uv(1), u64(8), u64(9), uv(0)}, nil), uint8(2), uint8(1), uint8(1))
	// Version 2: a sliding-window and a Mamba group.
	f.Add(bytes.Join([][]byte{uv(3), []byte("a:1"), uv(0), uv(1), uv(3), []byte("gpu"),
		uv(2), u64(7), u64(9), uv(1), {0}, uv(1), uv(1), u64(8), u64(10), uv(1), {0}, uv(1), uv(1),
		uv(2), uv(1), {1}, uv(9), uv(1), u64(8), u64(10), uv(1), uv(2), {2}, uv(0), uv(2), u64(7), u64(9), uv(2), u64(8), u64(10), uv(1)}, nil),
		uint8(2), uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, entries, members, version uint8) {
		ix, err := New(Config{BlockSize: testBS, SweepInterval: -1, MaxBlocksPerEndpoint: 1 << 12}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer ix.Close()
		data := forgeSectionV(body, uint64(entries), uint64(members), uint16(version))
		_, err = ix.ReadSnapshot(bytes.NewReader(data), SnapshotReadOptions{})
		// The same bytes in pieces of 1 to 7 bytes read to the same result.
		pieces, _ := New(Config{BlockSize: testBS, SweepInterval: -1, MaxBlocksPerEndpoint: 1 << 12}, Options{})
		defer pieces.Close()
		_, perr := pieces.ReadSnapshot(bytes.NewReader(data), SnapshotReadOptions{pieceMax: 1 + len(body)%7})
		if fmt.Sprint(err) != fmt.Sprint(perr) || !reflect.DeepEqual(dumpIndex(ix), dumpIndex(pieces)) {
			t.Fatalf("read whole: %v; in pieces of %d bytes: %v", err, 1+len(body)%7, perr)
		}
		if err != nil {
			if s := ix.Stats(); s.Memberships != 0 || s.Endpoints != 0 {
				t.Fatalf("refused snapshot left %+v", s)
			}
			return
		}
		var buf bytes.Buffer
		if _, err := ix.WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		again, _ := New(Config{BlockSize: testBS, SweepInterval: -1, MaxBlocksPerEndpoint: 1 << 12}, Options{})
		defer again.Close()
		if _, err := again.ReadSnapshot(&buf, SnapshotReadOptions{}); err != nil {
			t.Fatalf("rewritten snapshot refused: %v", err)
		}
	})
}
