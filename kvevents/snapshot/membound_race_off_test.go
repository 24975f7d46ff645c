//go:build !race

package snapshot

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// Loading a snapshot holds at most 1.5 × its size plus a constant: the
// bytes the client allocates to receive a reply over real ZeroMQ on
// loopback, plus what decoding every chunk (with one reused decoder and
// batch, as the pool's worker does) allocates, stay within
// 1.5 × snapshot bytes + 1 MiB. Allocation is counted cumulatively
// (runtime.MemStats.TotalAlloc), so the figure does not depend on when the
// garbage collector runs, and it bounds what is held at once. The server
// runs in a child process (this test binary), so its allocations are not
// counted. Without -race: the detector's shadow allocations would count.
func TestSnapshotLoadMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process serving a snapshot of several MB")
	}
	const target = 8 << 20
	addr, size, stop := startSnapshotChild(t, target)
	defer stop()
	c, err := NewClient(ClientConfig{AttemptTimeout: time.Minute, Timeout: 2 * time.Minute}, Options{})
	require.NoError(t, err)
	dec := wire.NewDecoder(wire.Limits{})
	var b wire.Batch
	load := func() (int64, int) {
		r, err := c.Fetch(context.Background(), addr)
		require.NoError(t, err)
		events := 0
		for i := range r.Chunks {
			require.NoError(t, dec.Decode(r.Chunks[i], &b))
			events += len(b.Events)
			r.Chunks[i] = nil // applied: its memory can go, as the pool does
		}
		return r.Bytes, events
	}
	load() // warm up: the decoder's and the batch's buffers, the limiter
	for round := range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got, events := load()
		runtime.ReadMemStats(&after)
		require.Equal(t, size, got)
		require.Positive(t, events)
		alloc := after.TotalAlloc - before.TotalAlloc
		bound := uint64(1.5*float64(size)) + 1<<20
		t.Logf("round %d: snapshot %d B in %d events: loading allocated %d B (%.3f × its size); bound %d B",
			round, size, events, alloc, float64(alloc)/float64(size), bound)
		require.LessOrEqual(t, alloc, bound, "loading a snapshot of %d B allocated %d B", size, alloc)
	}
}

// snapChildEnv makes the test binary serve a snapshot (TestSnapshotChild).
const snapChildEnv = "KVROUTE_SNAPSHOT_CHILD_BYTES"

// startSnapshotChild runs this test binary as a snapshot server of about
// target bytes and returns its address, the exact size and a stop func.
func startSnapshotChild(t *testing.T, target int) (addr string, size int64, stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSnapshotChild$", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", snapChildEnv, target))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	stop = func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "SNAPSHOT" {
			size, err = strconv.ParseInt(f[2], 10, 64)
			require.NoError(t, err)
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return f[1], size, stop
		}
	}
	stop()
	t.Fatalf("snapshot child printed no address: %v", sc.Err())
	return "", 0, nil
}

// TestSnapshotChild is the child process of TestSnapshotLoadMemoryBound:
// it serves a snapshot of vLLM-shaped chunks (256 stores of one block
// each) until its stdin closes. It does nothing in a normal run.
func TestSnapshotChild(t *testing.T) {
	target, _ := strconv.Atoi(os.Getenv(snapChildEnv))
	if target == 0 {
		t.Skip("the child process of TestSnapshotLoadMemoryBound")
	}
	var chunks [][]byte
	var size int64
	var wb wire.Batch
	for h := uint64(1); size < int64(target); {
		wb.Reset()
		wb.TS, wb.HasDPRank = 1.5, true
		for range 256 {
			toks := make([]uint32, 16)
			for i := range toks {
				toks[i] = uint32(h*16) + uint32(i)
			}
			wb.Events = append(wb.Events, wire.Event{Type: wire.EventBlockStored, BlockHashes: []uint64{h},
				HasParent: h > 1, ParentHash: h - 1, TokenIDs: toks, BlockSize: 16, Medium: "GPU",
				HasGroup: true, Kind: "full_attention"})
			h++
		}
		c := wire.AppendBatch(nil, &wb, wire.FormatVLLM)
		chunks = append(chunks, c)
		size += int64(len(c))
	}
	s, err := NewServer(ServerConfig{Addr: "tcp://127.0.0.1:0", PublisherID: testID},
		SourceFunc(func() (int64, [][]byte, bool) { return 99, chunks, true }), Options{})
	require.NoError(t, err)
	defer s.Close()
	fmt.Printf("SNAPSHOT %s %d\n", s.Endpoint(), size)
	_, _ = io.Copy(io.Discard, os.Stdin)
}
