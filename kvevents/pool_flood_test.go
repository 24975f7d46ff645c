package kvevents

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// floodPayload is a valid vLLM batch of about size bytes: one BlockStored
// of a sliding-window group (decoded in full, then skipped by the Applier,
// so the flood costs the index nothing and the test measures the queues).
func floodPayload(size int) []byte {
	const perBlock = 9 + poolBlockSize*3 // uint64 hash + 16 tokens of 3 bytes
	n := size / perBlock
	hashes := make([]uint64, n)
	toks := make([]uint32, n*poolBlockSize)
	for i := range hashes {
		hashes[i] = uint64(i) | 1<<63
	}
	for i := range toks {
		toks[i] = 1000 + uint32(i%60000)
	}
	return wire.AppendBatch(nil, &wire.Batch{TS: 1, HasDPRank: true, Events: []wire.Event{{
		Type: wire.EventBlockStored, BlockHashes: hashes, TokenIDs: toks, BlockSize: poolBlockSize,
		Medium: "GPU", HasGroup: true, Group: 1, Kind: "sliding_window",
	}}}, wire.FormatVLLM)
}

// floodScript publishes the payload files 0, 1, 2 of argv[1] in turn, on
// topic argv[2], from a libzmq PUB bound on a random loopback port (printed
// first), starting at a "go" line on stdin and stopping at EOF. A reader
// thread watches stdin; the main loop sends without pause, blocking at the
// PUB's send high-water mark like a vLLM publisher at full speed.
const floodScript = `
import os, sys, threading, zmq
d, topic = sys.argv[1], sys.argv[2].encode()
payloads = [open(os.path.join(d, str(i)), "rb").read() for i in range(3)]
ctx = zmq.Context()
pub = ctx.socket(zmq.PUB)
pub.setsockopt(zmq.SNDHWM, 4)
pub.setsockopt(zmq.LINGER, 0)
port = pub.bind_to_random_port("tcp://127.0.0.1")
print("tcp://127.0.0.1:%d" % port, flush=True)
sys.stdin.readline()
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
seq = 0
while not stop.is_set():
    try:
        pub.send_multipart([topic, seq.to_bytes(8, "big"), payloads[seq % 3]], flags=zmq.NOBLOCK, copy=False)
        seq += 1
    except zmq.Again:
        stop.wait(0.001)
pub.close()
ctx.term()
`

// heapPeak samples the heap in use and the bytes queued on the pool's
// workers until stop is called, and returns the largest values seen.
func heapPeak(p *Pool) (stop func() (heap, queued uint64)) {
	var peak, qpeak atomic.Uint64
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		// ReadMemStats stops the world; every 20 ms keeps that from slowing
		// the flood it measures (a full queue lasts far longer).
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			var q int64
			for _, w := range p.workers {
				q += w.queuedBytes()
			}
			if uint64(q) > qpeak.Load() {
				qpeak.Store(uint64(q))
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() (uint64, uint64) {
		once.Do(func() { close(done); <-exited })
		return peak.Load(), qpeak.Load()
	}
}

// A peer flooding valid 4–17 MiB payloads shares the only worker with a
// healthy endpoint. The queues are bounded in bytes: the flood's messages
// are the ones dropped (counted, and resynchronised by replay), the healthy
// endpoint loses nothing, and the heap stays bounded.
func TestPoolFloodOfLargePayloadsBoundedAndFair(t *testing.T) {
	defer leakcheck.Check(t)()
	if testing.Short() {
		t.Skip("moves about 600 MB through loopback")
	}
	ix := newPoolIndex(t)
	const floodID, healthyID = "127.0.0.1:9001", "127.0.0.1:9002"
	// The flood comes from a libzmq PUB in another process (send HWM 4),
	// so the heap measured here is the subscriber's alone.
	pytest.Require(t)
	dir := t.TempDir()
	for i, size := range []int{4 << 20, 9 << 20, 17 << 20} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), floodPayload(size), 0o600))
	}
	floodProc := exec.Command(pytest.Python, "-c", floodScript, dir, string(wire.AppendTopic(nil, floodID, poolModel)))
	floodIn, err := floodProc.StdinPipe()
	require.NoError(t, err)
	floodOut, err := floodProc.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, floodProc.Start())
	defer func() { _ = floodProc.Process.Kill(); _ = floodProc.Wait() }()
	floodAddr, err := bufio.NewReader(floodOut).ReadString('\n')
	require.NoError(t, err)
	// Its replay address answers every request with an empty replay.
	replayOnly := newTestPublisher(t, zmqpub.Config{Endpoint: floodID, Model: poolModel, ReplayAddr: "127.0.0.1:0", BufferSize: 1})
	defer replayOnly.Close()
	healthy := newTestPublisher(t, zmqpub.Config{Endpoint: healthyID, Model: poolModel})
	defer healthy.Close()

	p, logs := newTestPool(t, PoolConfig{Concurrency: 1}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: floodID, EventsAddress: strings.TrimSpace(floodAddr),
		ReplayAddress: replayOnly.ReplayEndpoint()}))
	require.NoError(t, p.Ensure(Endpoint{ID: healthyID, EventsAddress: healthy.Endpoint()}))
	first := publishUntilReceived(t, p, healthy, healthyID)
	waitApplied(t, p, healthyID, first)

	runtime.GC()
	peak := heapPeak(p)
	defer peak() // stops the sampler when an assertion below fails first
	_, err = floodIn.Write([]byte("go\n"))
	require.NoError(t, err)
	m := p.metrics()
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.QueueShedBytes) > 0 },
		poolWait, poolTick, "the flood never filled the queue")

	var last uint64
	for range 300 {
		last = publishN(t, healthy, 1)
		if last%50 == 0 {
			runtime.Gosched()
		}
	}
	require.Eventually(t, func() bool { st, _ := p.Status(healthyID); return st.Applied >= last },
		4*poolWait, poolTick, "the healthy endpoint kept flowing")
	// Keep flooding until about 600 MB has arrived and the bounds have
	// shed many messages: without byte bounds the queue would hold them
	// and the heap would grow with the flood's length.
	// A hang bound: about 600 MB through a race-enabled subscriber on a
	// loaded 2-core machine has taken over a minute.
	if !assert.Eventually(t, func() bool {
		return counter(m.MessagesReceived, floodID) >= 60 &&
			counter(m.Dropped, floodID, string(dropQueueFull))+counter(m.Dropped, floodID, string(dropHoldFull)) >= 20
	}, 10*poolWait, poolTick) {
		t.Fatalf("the flood was not shed: %.0f flood messages received, %.0f queue_full + %.0f hold_full dropped",
			counter(m.MessagesReceived, floodID), counter(m.Dropped, floodID, string(dropQueueFull)), counter(m.Dropped, floodID, string(dropHoldFull)))
	}
	require.NoError(t, floodIn.Close()) // the script stops at EOF
	require.NoError(t, floodProc.Wait())
	peakBytes, peakQueued := peak()
	t.Logf("peak heap in use during the flood: %.0f MiB (queued payloads: %.1f MiB); flood messages received: %.0f, shed: %.0f queue_full + %.0f hold_full (%.0f MiB by the queues)",
		float64(peakBytes)/(1<<20), float64(peakQueued)/(1<<20), counter(m.MessagesReceived, floodID), counter(m.Dropped, floodID, string(dropQueueFull)), counter(m.Dropped, floodID, string(dropHoldFull)),
		testutil.ToFloat64(m.QueueShedBytes)/(1<<20))

	requireHeld(t, ix, healthyID, first, last)
	require.Zero(t, counter(m.Dropped, healthyID, string(dropQueueFull)), "the healthy endpoint lost nothing")
	require.Zero(t, counter(m.SequenceGaps, healthyID))
	require.Greater(t, counter(m.Dropped, floodID, string(dropQueueFull)), 0.0, "the flood's messages were shed, and counted")
	require.Eventually(t, func() bool { return logs.count("Resynchronising after dropped messages") >= 1 },
		poolWait, poolTick, "the flooding endpoint is resynchronised: %s", logs)

	// Queued payload bytes are bounded by 1.25 × QueueBytes; the heap also
	// holds frames being read, the decoder's working set and garbage
	// awaiting collection.
	require.LessOrEqual(t, peakQueued, uint64(defaultQueueBytes+defaultQueueBytes/4), "queued bytes bounded")
	require.Less(t, peakBytes, uint64(512<<20), "heap bounded under the flood")

	require.NoError(t, p.Close())
	require.NoError(t, replayOnly.Close())
	require.NoError(t, healthy.Close())
}
