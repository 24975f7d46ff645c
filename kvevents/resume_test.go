package kvevents

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

const resumeID = "127.0.0.1:8000"

// resumeBatch is batch n of the resume tests: it stores batch n's blocks
// and, every third batch, stores batch n-1's blocks once more (a second GPU
// copy, reference count 2), so that applying a batch twice changes the
// index.
func resumeBatch(n uint64) []byte {
	b := poolBatch(n, poolBlocks)
	if n%3 == 0 && n > 0 {
		b.Events = append(b.Events, poolBatch(n-1, poolBlocks).Events...)
	}
	return wire.AppendBatch(nil, b, wire.FormatVLLM)
}

func publishResume(t *testing.T, pub *zmqpub.Publisher, from, to uint64) {
	t.Helper()
	for n := from; n <= to; n++ {
		seq, err := pub.Publish(resumeBatch(n))
		require.NoError(t, err)
		require.Equal(t, n, seq)
	}
}

// snap writes ix's snapshot.
func snap(t *testing.T, ix *kvindex.Index) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := ix.WriteSnapshot(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// loaded returns a new index loaded from a snapshot.
func loaded(t *testing.T, data []byte) *kvindex.Index {
	t.Helper()
	ix := newPoolIndex(t)
	_, err := ix.ReadSnapshot(bytes.NewReader(data), kvindex.SnapshotReadOptions{})
	require.NoError(t, err)
	return ix
}

// runPool subscribes a pool on ix to pub until it applied seq last, and
// returns the pool (closed by the caller).
func runPool(t *testing.T, cfg PoolConfig, ix *kvindex.Index, pub *zmqpub.Publisher, last uint64) (*Pool, *logBuffer, *prometheus.Registry) {
	t.Helper()
	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	p, err := NewPool(cfg, ix, Options{Set: telemetry.Set{Registerer: reg, Logger: logs.logger()}})
	require.NoError(t, err)
	require.NoError(t, p.Ensure(Endpoint{ID: resumeID, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}))
	waitApplied(t, p, resumeID, last)
	return p, logs, reg
}

func resumes(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_kv_events_resumes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A router that restarts from a snapshot resumes each stream at its
// position: the batches published while it was down are applied exactly
// once (reference counts included), and its index equals, byte for byte,
// the index of a router that never restarted.
func TestPoolResumeFromSnapshotAppliesDowntimeOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: resumeID, Model: poolModel, ReplayAddr: "127.0.0.1:0", BufferSize: 1000})
	defer pub.Close()
	publishResume(t, pub, 0, 29)

	ref := newPoolIndex(t) // never restarts
	refPool, _, _ := runPool(t, PoolConfig{}, ref, pub, 29)
	defer refPool.Close()

	first := newPoolIndex(t)
	p1, _, _ := runPool(t, PoolConfig{}, first, pub, 29)
	require.NoError(t, p1.Close())
	data := snap(t, first)

	publishResume(t, pub, 30, 44) // published while the router is down
	waitApplied(t, refPool, resumeID, 44)

	ix := loaded(t, data)
	p2, logs, reg := runPool(t, PoolConfig{}, ix, pub, 44)
	defer p2.Close()
	require.Equal(t, 1.0, resumes(t, reg, ResumeOK), "%s", logs)
	requireHeld(t, ix, resumeID, 0, 44)

	publishResume(t, pub, 45, 50) // and live again
	waitApplied(t, p2, resumeID, 50)
	waitApplied(t, refPool, resumeID, 50)
	require.Equal(t, snap(t, ref), snap(t, ix), "the resumed index equals the never-restarted one")
	require.Zero(t, testutil.ToFloat64(p2.metrics().PublisherRestarts.WithLabelValues(resumeID)))

	p2.Remove(resumeID) // it left the pool: its resume series go with it
	require.Zero(t, resumes(t, reg, ResumeOK))
}

// The replay buffer no longer holds the position: the loaded entries stay
// (counted resumed_with_gap), and the window is applied on top of them.
func TestPoolResumeWithGapKeepsEntries(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: resumeID, Model: poolModel, ReplayAddr: "127.0.0.1:0", BufferSize: 5})
	defer pub.Close()
	publishResume(t, pub, 0, 3)
	first := newPoolIndex(t)
	p1, _, _ := runPool(t, PoolConfig{}, first, pub, 3)
	for n := uint64(4); n <= 9; n++ {
		// One at a time: a subscription lost under load is repaired by a
		// replay the 5-batch buffer still covers.
		publishResume(t, pub, n, n)
		waitApplied(t, p1, resumeID, n)
	}
	require.NoError(t, p1.Close())
	data := snap(t, first)

	publishResume(t, pub, 10, 40) // far past the 5-batch buffer

	for _, clear := range []bool{false, true} {
		ix := loaded(t, data)
		p, logs, reg := runPool(t, PoolConfig{ClearOnResumeGap: clear}, ix, pub, 40)
		requireHeld(t, ix, resumeID, 36, 40)
		if clear {
			require.Equal(t, 1.0, resumes(t, reg, ResumeGapCleared), "%s", logs)
			require.Zero(t, heldBlocks(ix, resumeID, 2), "cleared: the old prefixes are gone")
		} else {
			require.Equal(t, 1.0, resumes(t, reg, ResumeWithGap), "%s", logs)
			requireHeld(t, ix, resumeID, 0, 9) // the snapshot's prefixes survive
			require.Zero(t, heldBlocks(ix, resumeID, 20), "lost batches are not invented")
		}
		require.NoError(t, p.Close())
	}
}

// The engine restarted while the router was down: the digest at the
// position differs, so the endpoint is cleared and rebuilt from 0.
func TestPoolResumeAfterEngineRestartRebuilds(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: resumeID, Model: poolModel, ReplayAddr: "127.0.0.1:0", BufferSize: 1000})
	publishResume(t, pub, 0, 9)
	first := newPoolIndex(t)
	p1, _, _ := runPool(t, PoolConfig{}, first, pub, 9)
	require.NoError(t, p1.Close())
	data := snap(t, first)
	require.NoError(t, pub.Close())

	for _, n := range []uint64{20, 4} { // new lifetime longer, then shorter, than the position
		pub2 := newTestPublisher(t, zmqpub.Config{Endpoint: resumeID, Model: poolModel, ReplayAddr: "127.0.0.1:0", BufferSize: 1000})
		for i := uint64(0); i < n; i++ {
			_, err := pub2.Publish(resumeBatch(100 + i)) // other content
			require.NoError(t, err)
		}
		ix := loaded(t, data)
		p, logs, reg := runPool(t, PoolConfig{}, ix, pub2, n-1)
		require.Eventually(t, func() bool { return heldBlocks(ix, resumeID, 100+n-1) == poolBlocks }, poolWait, poolTick, "%s", logs)
		require.Equal(t, 1.0, resumes(t, reg, ResumeRestarted), "lifetime of %d batches: %s", n, logs)
		require.Zero(t, heldBlocks(ix, resumeID, 3), "the old lifetime's blocks were cleared")
		requireHeld(t, ix, resumeID, 100, 100+n-1)
		require.NoError(t, p.Close())
		require.NoError(t, pub2.Close())
	}
}

func TestPositionEncoding(t *testing.T) {
	p := positionOf(42, []byte("payload"))
	got, err := decodePosition(p.appendBinary(nil))
	pg, groups, err2 := parsePosition(appendPosition(nil, p, map[int]string{1: "full_attention", 0: "sliding_window"}))
	require.NoError(t, err2)
	require.Equal(t, p, pg)
	require.Equal(t, map[int]string{1: "full_attention", 0: "sliding_window"}, groups)
	require.Equal(t, appendPosition(nil, p, groups), appendPosition(nil, p, map[int]string{0: "sliding_window", 1: "full_attention"}), "deterministic")
	require.NoError(t, err)
	require.Equal(t, p, got)
	_, err = decodePosition([]byte{2, 0})
	require.Error(t, err)
	require.NotEqual(t, p.Digest, positionOf(42, []byte("other")).Digest)
}

// vLLM names a cache group's kind only on BlockStored. A stream resumed
// from a position must still classify the removals of groups whose stores
// it never saw: the kinds travel with the position.
func TestPoolResumeAppliesRemovalsOfRestoredGroups(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: resumeID, Model: poolModel, ReplayAddr: "127.0.0.1:0", BufferSize: 100})
	defer pub.Close()
	publishResume(t, pub, 0, 5)
	first := newPoolIndex(t)
	p1, _, _ := runPool(t, PoolConfig{}, first, pub, 5)
	require.NoError(t, p1.Close())
	data := snap(t, first)

	rm := poolBatch(4, poolBlocks).Events[0] // stored once (batch 3 re-stores batch 2)
	_, err := pub.Publish(wire.AppendBatch(nil, &wire.Batch{TS: 6, Events: []wire.Event{{Type: wire.EventBlockRemoved, BlockHashes: rm.BlockHashes,
		Medium: "GPU", HasGroup: true, Group: 0}}, HasDPRank: true}, wire.FormatVLLM))
	require.NoError(t, err)

	ix := loaded(t, data)
	requireHeld(t, ix, resumeID, 4, 4)
	p, logs, _ := runPool(t, PoolConfig{}, ix, pub, 6)
	defer p.Close()
	require.Zero(t, heldBlocks(ix, resumeID, 4), "the removal of group 0 applied after the resume: %s", logs)
	requireHeld(t, ix, resumeID, 0, 3)
	requireHeld(t, ix, resumeID, 5, 5)
}

// Ensure with a new address replaces the stream and clears the endpoint;
// the new stream must not adopt the old stream's position (it would skip
// the replay from 0 that rebuilds the endpoint).
func TestPoolReplacedStreamDoesNotAdoptOldPosition(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: resumeID, Model: poolModel, ReplayAddr: "127.0.0.1:0", BufferSize: 100})
	defer pub.Close()
	publishResume(t, pub, 0, 5)
	ix := newPoolIndex(t)
	p, _, reg := runPool(t, PoolConfig{}, ix, pub, 5)
	defer p.Close()
	pub2 := newTestPublisher(t, zmqpub.Config{Endpoint: resumeID, Model: poolModel, ReplayAddr: "127.0.0.1:0", BufferSize: 100})
	defer pub2.Close()
	for i := uint64(0); i < 3; i++ {
		_, err := pub2.Publish(resumeBatch(200 + i))
		require.NoError(t, err)
	}
	require.NoError(t, p.Ensure(Endpoint{ID: resumeID, Model: poolModel, EventsAddress: pub2.Endpoint(), ReplayAddress: pub2.ReplayEndpoint()}))
	require.Eventually(t, func() bool { return heldBlocks(ix, resumeID, 202) == poolBlocks }, poolWait, poolTick)
	requireHeld(t, ix, resumeID, 200, 202)
	require.Zero(t, heldBlocks(ix, resumeID, 3))
	require.Zero(t, resumes(t, reg, ResumeOK)+resumes(t, reg, ResumeRestarted)+resumes(t, reg, ResumeWithGap))
}

// resumePending reports whether a position given to EnsureFrom waits for
// endpoint id's next new stream.
func resumePending(p *Pool, id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.resume[id]
	return ok
}

// A position given to EnsureFrom belongs to the stream EnsureFrom creates
// for the endpoint, and to no other: one given for an endpoint that does
// not match Options.Matcher, for one that already has a stream (replaced
// or kept), or for one removed before its stream was created is dropped,
// never adopted by a later unrelated stream of the same ID (which would
// take a watermark the index does not hold).
func TestPoolEnsureFromPositionOnlyForItsNewStream(t *testing.T) {
	defer leakcheck.Check(t)()
	const id = "127.0.0.1:8400"
	pos := Position{Seq: 41, Digest: 0xfeed}
	stable := map[string]string{"track": "stable"}
	canary := map[string]string{"track": "canary"}
	matcher := func(l map[string]string) bool { return l["track"] != "canary" }
	ep := func(addr string, labels map[string]string) Endpoint {
		// Nothing listens on these addresses: the streams never connect,
		// so Position reports what a stream would start from.
		return Endpoint{ID: id, Model: poolModel, EventsAddress: addr, Labels: labels}
	}
	newPool := func(cfg PoolConfig) *Pool {
		p, err := NewPool(cfg, newPoolIndex(t), Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}, Matcher: matcher})
		require.NoError(t, err)
		return p
	}

	t.Run("dial", func(t *testing.T) {
		p := newPool(PoolConfig{})
		defer p.Close()
		require.NoError(t, p.EnsureFrom(ep("tcp://127.0.0.1:1", canary), pos)) // not selected: no stream
		require.Empty(t, p.Endpoints())
		require.False(t, resumePending(p, id))
		require.NoError(t, p.Ensure(ep("tcp://127.0.0.1:1", stable)))
		_, ok := p.Position(id)
		require.False(t, ok, "a later stream adopted the position given for an endpoint that was not selected")

		require.NoError(t, p.EnsureFrom(ep("tcp://127.0.0.1:2", stable), pos)) // replaces the stream
		_, ok = p.Position(id)
		require.False(t, ok, "the replacing stream adopted a position although the endpoint had a stream")
		require.False(t, resumePending(p, id))

		p.Remove(id)
		require.NoError(t, p.EnsureFrom(ep("tcp://127.0.0.1:1", stable), pos)) // a new stream: it starts from pos
		got, ok := p.Position(id)
		require.True(t, ok)
		require.Equal(t, pos, got)
		require.False(t, resumePending(p, id))
		require.NoError(t, p.Close())
	})

	t.Run("bind", func(t *testing.T) {
		p := newPool(PoolConfig{BindAddress: "127.0.0.1:0"})
		defer p.Close()
		require.NoError(t, p.EnsureFrom(ep("", canary), pos))
		require.False(t, resumePending(p, id), "kept for an endpoint that is not selected")
		require.NoError(t, p.EnsureFrom(ep("", stable), pos))
		require.True(t, resumePending(p, id), "kept for the stream the endpoint's first message creates")
		require.NoError(t, p.Ensure(ep("", canary)))
		require.False(t, resumePending(p, id), "kept for an endpoint relabelled out of the matcher")
		require.NoError(t, p.EnsureFrom(ep("", stable), pos))
		p.Remove(id)
		require.False(t, resumePending(p, id), "kept for a removed endpoint")
		require.NoError(t, p.Ensure(ep("", stable)))
		require.False(t, resumePending(p, id))
		require.NoError(t, p.Close())
	})
}
