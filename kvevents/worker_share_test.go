package kvevents

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// offer enqueues n messages of a one-byte payload from st on w and returns
// how many were queued.
func offer(w *worker, st *stream, n int) int {
	queued := 0
	for range n {
		if w.enqueue(item{st: st, payload: []byte("x")}) {
			queued++
		}
	}
	return queued
}

// drain takes every queued message off w, as its goroutine would.
func drain(w *worker) {
	for len(w.q) > 0 {
		w.dequeued(<-w.q)
	}
}

// A flood of tiny payloads from one endpoint filled its worker's queue by
// message count, which the byte bounds never reached, and every message of
// a quiet endpoint on the same worker was dropped. The queue's messages are
// now shared: an endpoint may always queue its share (QueueSize / the
// endpoints on the worker) and beyond it only what the others' shares leave
// free, so the flood is refused and the quiet endpoint still queues.
func TestWorkerSharesQueueSlotsBetweenEndpoints(t *testing.T) {
	m, err := newMetrics(&registrar{})
	require.NoError(t, err)
	// No goroutine runs the worker: nothing queued is consumed until drain.
	w := newWorker(&PoolConfig{QueueSize: 8, QueueBytes: 1 << 20, EndpointQueueBytes: 1 << 20}, m)
	flood, quiet, third := &stream{}, &stream{}, &stream{}

	w.setStreams(2)
	require.Equal(t, 4, offer(w, flood, 100), "the flood queues its share, the quiet endpoint's is kept")
	require.Equal(t, 4, offer(w, quiet, 4), "the quiet endpoint queues its whole share next to the flood")
	require.Zero(t, offer(w, quiet, 1), "beyond its share nothing is free")
	drain(w)
	require.Empty(t, w.perEp)

	// Three endpoints: shares of 2, and 2 free that the first to come takes.
	w.setStreams(3)
	require.Equal(t, 4, offer(w, flood, 100))
	require.Equal(t, 2, offer(w, quiet, 100))
	require.Equal(t, 2, offer(w, third, 100))
	// A message of the flood's taken off the queue frees a slot beyond
	// its share: free for the first that asks.
	it := <-w.q
	w.dequeued(it)
	require.Same(t, flood, it.st)
	require.Equal(t, 1, offer(w, quiet, 100))
	require.Zero(t, offer(w, flood, 1))
	drain(w)

	// Alone on its worker an endpoint may fill the whole queue.
	w.setStreams(1)
	require.Equal(t, 8, offer(w, flood, 100))
	drain(w)
	require.Empty(t, w.perEp)
	require.Zero(t, w.queuedBytes())
}

// A message's model name, taken from its topic when its endpoint has no
// configured model, is a string of its own and counts in the byte bounds
// beside its payload: a publisher alternating between long topics made
// each queued message hold a copy of its model the bounds never saw. The
// configured model, one string shared by every message, does not count.
func TestWorkerCountsTopicModelBytes(t *testing.T) {
	m, err := newMetrics(&registrar{})
	require.NoError(t, err)
	w := newWorker(&PoolConfig{QueueSize: 64, QueueBytes: 1 << 20, EndpointQueueBytes: 1 << 20}, m)
	w.setStreams(1)
	long := strings.Repeat("m", 256<<10)
	bare := &stream{}
	queued := 0
	for range 8 {
		if w.enqueue(item{st: bare, model: strings.Clone(long), payload: []byte("x")}) {
			queued++
		}
	}
	require.Equal(t, 3, queued, "three 256 KiB model names and their payloads fit in 1 MiB, a fourth does not")
	require.Equal(t, int64(3*(len(long)+1)), w.queuedBytes())
	drain(w)
	require.Zero(t, w.queuedBytes())

	configured := &stream{cfgModel: long}
	require.Equal(t, 8, func() int {
		n := 0
		for range 8 {
			if w.enqueue(item{st: configured, model: configured.cfgModel, payload: []byte("x")}) {
				n++
			}
		}
		return n
	}(), "the configured model is shared: only payloads count")
	require.Equal(t, int64(8), w.queuedBytes())
	drain(w)
}
