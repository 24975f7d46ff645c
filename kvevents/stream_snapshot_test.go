package kvevents

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/replay"
)

// fakeEngineState is an engine's cache as its snapshot recorder sees it in
// the pool tests' layout (each batch stores its own blocks, nothing is
// evicted): the snapshot at sequence S is the program "store the blocks of
// batches 0..S", sent as one chunk per batch.
type fakeEngineState struct {
	mu          sync.Mutex
	last        int64  // last sequence published (-1: none)
	unavailable int    // answer "unavailable" this many more times
	base        uint64 // batch layout of sequence s is base+s (a new lifetime: another base)
}

func (e *fakeEngineState) published(seq uint64) {
	e.mu.Lock()
	e.last = max(e.last, int64(seq))
	e.mu.Unlock()
}

func (e *fakeEngineState) Snapshot() (int64, [][]byte, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.unavailable > 0 {
		e.unavailable--
		return 0, nil, false
	}
	chunks := make([][]byte, 0, e.last+1)
	for s := int64(0); s <= e.last; s++ {
		chunks = append(chunks, poolPayload(e.base+uint64(s)))
	}
	return e.last, chunks, true
}

// withSnapshot gives the fixture's stream an engine snapshot socket (a real
// snapshot.Server on loopback) serving eng.
func (f *seqFixture) withSnapshot(eng *fakeEngineState) *snapshot.Server {
	srv, err := snapshot.NewServer(snapshot.ServerConfig{Addr: "tcp://127.0.0.1:0", PublisherID: [16]byte{7}}, eng, snapshot.Options{})
	require.NoError(f.t, err)
	f.closers = append(f.closers, srv.Close)
	f.useSnapshotClient(srv.Endpoint(), snapshot.ClientConfig{Backoff: 1})
	return srv
}

// useSnapshotClient gives the stream the pool's snapshot client built
// from cc (its attempt errors counted in the pool's metrics).
func (f *seqFixture) useSnapshotClient(addr string, cc snapshot.ClientConfig) {
	cc.Limiter = snapshot.NewLimiter(2)
	f.p.mu.Lock()
	f.p.cfg.Snapshot.Client = cc
	f.st.snapAddr, f.st.sc = addr, f.p.snapshotClient(seqID)
	f.p.mu.Unlock()
}

func (f *seqFixture) snapCount(result string) float64 {
	return counter(f.p.snm.loads, seqID, result)
}

// A router live on an engine misses more batches than the engine's replay
// buffer holds (5..99 with a 10-batch buffer). The replay's first batch is
// 90, not 5: instead of clearing the endpoint and rebuilding it from the
// 10-batch window (which leaves batches 0..89 out), the stream loads the
// engine's snapshot at sequence 100 and every batch 0..100 is indexed.
func TestStreamGapBeyondReplayBufferRestoredBySnapshot(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 10, "")
	defer f.close()
	eng := &fakeEngineState{last: -1}
	srv := f.withSnapshot(eng)
	pub := func(seq uint64) { eng.published(seq); f.publish(seq, seq) }
	for s := uint64(0); s < 5; s++ {
		pub(s)
	}
	f.wait(4)
	require.Equal(t, 1.0, f.snapCount(snapLoaded), "joining loads the snapshot\n%s", f.logs)
	for s := uint64(5); s < 100; s++ {
		eng.published(s)
		f.hide(s, s) // lost on the wire; the 10-batch buffer keeps 90..99
	}
	pub(100)
	f.wait(100)
	for s := uint64(0); s <= 100; s++ {
		require.True(t, f.held(s), "batch %d\n%s", s, f.logs)
	}
	require.Equal(t, 2.0, f.snapCount(snapLoaded), f.logs.String())
	require.Equal(t, 1.0, f.count("replays", replaySnapshot), f.logs.String())
	require.Equal(t, 0.0, f.count("replays", replayPartial))
	st := f.status()
	require.Equal(t, sourceSnapshot, st.IndexSource)
	require.False(t, st.Degraded)
	require.Equal(t, uint64(2), srv.Stats().Served)
	require.Equal(t, 1, f.logs.count("Replay buffer no longer holds the range"), f.logs.String())
}

// The same gap without a snapshot socket: the endpoint is rebuilt from the
// replay window, and the batches before it are lost (the behaviour the
// snapshot improves on).
func TestStreamGapBeyondReplayBufferWithoutSnapshotLosesHistory(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 10, "")
	defer f.close()
	for s := uint64(0); s < 5; s++ {
		f.publish(s, s)
	}
	f.wait(4)
	for s := uint64(5); s < 100; s++ {
		f.hide(s, s)
	}
	f.publish(100, 100)
	f.wait(100)
	require.False(t, f.held(0))
	require.False(t, f.held(90))
	require.True(t, f.held(91)) // the 10-batch window: 91..100
	require.Equal(t, 1.0, f.count("replays", replayPartial))
}

// An engine whose snapshot is "unavailable" for a while is retried until
// it serves; the stream holds live messages meanwhile and applies them
// after the snapshot's sequence.
func TestStreamSnapshotRetriedWhileUnavailable(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 10, "")
	defer f.close()
	eng := &fakeEngineState{last: -1, unavailable: 3}
	srv := f.withSnapshot(eng)
	for s := uint64(0); s < 50; s++ {
		eng.published(s) // before the router joined
	}
	for s := uint64(50); s < 60; s++ {
		eng.published(s)
		f.publish(s, s)
	}
	f.wait(59)
	for s := uint64(0); s < 60; s++ {
		require.True(t, f.held(s), "batch %d\n%s", s, f.logs)
	}
	require.Equal(t, uint64(3), srv.Stats().Unavailable)
	require.Equal(t, 3.0, counter(f.p.snm.errors, seqID, snapshot.OpUnavailable))
	require.Equal(t, 1.0, f.snapCount(snapLoaded))
}

// A snapshot socket that never answers usefully: after the load's overall
// deadline the stream replays instead (here from the window), so a broken
// snapshot costs time, never the index.
func TestStreamSnapshotFailureFallsBackToReplay(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 10, "")
	defer f.close()
	eng := &fakeEngineState{last: -1, unavailable: 1 << 30}
	srv := f.withSnapshot(eng)
	f.useSnapshotClient(srv.Endpoint(), snapshot.ClientConfig{Backoff: 1, Timeout: 100 * time.Millisecond})
	for s := uint64(0); s < 20; s++ {
		f.hide(s, s)
	}
	f.publish(20, 20)
	f.wait(20)
	require.True(t, f.held(11) && f.held(20), f.logs.String())
	require.False(t, f.held(9))
	require.Equal(t, 1.0, f.snapCount(snapFailed), f.logs.String())
	require.Equal(t, sourceReplay, f.status().IndexSource)
}

// vllmExportChunks is a snapshot of batches 0..last in the shape of vLLM's
// recorder export: the teaching stores, then token-less stores that set
// each block's residency count, then the removal of the teaching stores
// (which the consumer must absorb by counting references).
func vllmExportChunks(last uint64) [][]byte {
	var teach, resident, untaught wire.Batch
	for s := uint64(0); s <= last; s++ {
		b := poolBatch(s, poolBlocks)
		teach.Events = append(teach.Events, b.Events[0])
		e := b.Events[0]
		e.TokenIDs, e.BlockSize, e.Kind = nil, 0, ""
		resident.Events = append(resident.Events, e)
		rm := wire.Event{Type: wire.EventBlockRemoved, BlockHashes: e.BlockHashes, Medium: "GPU", HasGroup: true}
		untaught.Events = append(untaught.Events, rm)
	}
	var out [][]byte
	for _, b := range []*wire.Batch{&teach, &resident, &untaught} {
		b.TS, b.HasDPRank = 1, true
		out = append(out, wire.AppendBatch(nil, b, wire.FormatVLLM))
	}
	return out
}

// A snapshot in vLLM's export shape (teach, token-less residency stores,
// removal of the teaching stores) leaves every resident block indexed:
// the stream counts the references the token-less stores add, so the
// final removals do not evict. Applied as plain events, they would.
func TestStreamSnapshotInVLLMExportShapeKeepsResidentBlocks(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 10, "")
	defer f.close()
	const last = 40
	srv, err := snapshot.NewServer(snapshot.ServerConfig{Addr: "tcp://127.0.0.1:0"},
		snapshot.SourceFunc(func() (int64, [][]byte, bool) { return last, vllmExportChunks(last), true }), snapshot.Options{})
	require.NoError(t, err)
	f.closers = append(f.closers, srv.Close)
	f.useSnapshotClient(srv.Endpoint(), snapshot.ClientConfig{Backoff: 1})
	f.publish(last+1, last+1)
	f.wait(last + 1)
	for s := uint64(0); s <= last+1; s++ {
		require.True(t, f.held(s), "batch %d\n%s", s, f.logs)
	}
	require.Equal(t, 1.0, f.snapCount(snapLoaded))
}

// Closing the pool while a snapshot load waits on an engine that keeps
// answering "unavailable" ends the load at once: no goroutine is left.
func TestStreamSnapshotLoadCancelledOnClose(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 10, "")
	eng := &fakeEngineState{last: -1, unavailable: 1 << 30}
	srv := f.withSnapshot(eng)
	f.useSnapshotClient(srv.Endpoint(), snapshot.ClientConfig{Backoff: time.Hour, Timeout: time.Hour})
	f.publish(0, 0)
	require.Eventually(t, func() bool { return srv.Stats().Unavailable > 0 }, poolWait, poolTick)
	require.Equal(t, "snapshot", f.status().Phase)
	f.close()
}

// An engine that restarted (its sequence went back to 0 and it already
// published 0..5 of its new lifetime while the router was away) is rebuilt
// from its snapshot: the old lifetime's blocks are gone, the new one's are
// all indexed.
func TestStreamRestartLoadsTheNewLifetimesSnapshot(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 0, "")
	defer f.close()
	eng := &fakeEngineState{last: -1}
	f.withSnapshot(eng)
	for s := uint64(0); s < 10; s++ {
		eng.published(s)
		f.publish(s, s)
	}
	f.wait(9)
	eng.mu.Lock()
	eng.base, eng.last = 1000, 5 // restarted; 0..4 published unseen
	eng.mu.Unlock()
	f.st.receive(5, poolPayload(1005), poolModel) // returns once the restart cleared the endpoint
	f.wait(5)
	require.True(t, f.held(1000) && f.held(1005) && !f.held(0), f.logs.String())
	require.Equal(t, 1.0, f.count("restarts"))
	require.Equal(t, 2.0, f.snapCount(snapLoaded))
	require.Equal(t, 2, f.logs.count("reason=restart"), f.logs.String()) // loading, loaded
}

// withSnapshotOf is withSnapshot for a recorder whose publisher identity
// is id.
func (f *seqFixture) withSnapshotOf(eng *fakeEngineState, id [16]byte) {
	srv, err := snapshot.NewServer(snapshot.ServerConfig{Addr: "tcp://127.0.0.1:0", PublisherID: id}, eng, snapshot.Options{})
	require.NoError(f.t, err)
	f.closers = append(f.closers, srv.Close)
	f.useSnapshotClient(srv.Endpoint(), snapshot.ClientConfig{Backoff: 1})
}

// publishID publishes batch seq of the publisher with identity id: in the
// replay buffer and live.
func (f *seqFixture) publishID(seq uint64, id [16]byte) {
	f.buf.Add(seq, nil, idPayload(seq, id))
	f.st.receive(seq, idPayload(seq, id), poolModel)
}

// A snapshot whose publisher identity is not the live stream's belongs to
// another publisher lifetime (the engine restarted, or the snapshot socket
// is another engine's): its sequence says nothing of the live stream's, so
// it is refused and counted (snapshot_errors_total{reason=
// "publisher_mismatch"}, a failed load), and the replay rebuilds the
// endpoint instead. Applied, its blocks stood for the endpoint's and the
// live batches up to its sequence were dropped as already applied.
func TestStreamSnapshotOfAnotherPublisherRefused(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 10, "")
	defer f.close()
	eng := &fakeEngineState{last: -1, base: 1000} // another engine's blocks
	f.withSnapshotOf(eng, pidB)
	for s := uint64(0); s < 5; s++ {
		eng.published(s)
	}
	for s := uint64(0); s < 5; s++ {
		f.publishID(s, pidA) // the first one starts the join, which loads the snapshot
	}
	f.wait(4)
	for s := uint64(0); s < 5; s++ {
		require.True(t, f.held(s), "batch %d\n%s", s, f.logs)
	}
	require.False(t, f.held(1000), "the other publisher's snapshot was applied\n%s", f.logs)
	require.Equal(t, 1.0, counter(f.p.snm.errors, seqID, snapRefusedPublisher), f.logs.String())
	require.Equal(t, 1.0, f.snapCount(snapFailed))
	require.Zero(t, f.snapCount(snapLoaded))
	require.Equal(t, sourceReplay, f.status().IndexSource)
	require.Equal(t, pidA, f.status().PublisherID)
}

// A snapshot loaded before the live stream showed any identity holds the
// entries of its publisher: a live stream that then shows another identity
// does not continue it, so the endpoint is restarted (cleared, counted as
// an identity change) and rebuilt from the live publisher, whose snapshot
// socket still answers for the other one (refused) and whose replay then
// rebuilds it.
func TestStreamLiveIdentityOtherThanTheLoadedSnapshotsRestarts(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 10, "")
	defer f.close()
	eng := &fakeEngineState{last: -1, base: 1000}
	f.withSnapshotOf(eng, pidB)
	for s := uint64(0); s < 5; s++ {
		eng.published(s)
		f.buf.Add(s, nil, idPayload(s, pidA))
	}
	f.st.onConnect(false) // joins before any live message: loads the snapshot
	require.Eventually(t, func() bool { return f.snapCount(snapLoaded) == 1 && !f.status().Replaying },
		poolWait, poolTick, f.logs.String())
	require.True(t, f.held(1000))

	f.publishID(5, pidA)
	f.wait(5)
	for s := uint64(0); s <= 5; s++ {
		require.True(t, f.held(s), "batch %d\n%s", s, f.logs)
	}
	require.False(t, f.held(1000), "the live stream went on from another publisher's snapshot\n%s", f.logs)
	require.Equal(t, 1.0, f.count("restarts"))
	require.Equal(t, 1.0, counter(f.p.sm.lv.IdentityChanges, seqID))
	require.Equal(t, 1.0, counter(f.p.snm.errors, seqID, snapRefusedPublisher), f.logs.String())
	require.Equal(t, pidA, f.status().PublisherID)
}

// withSnapshotAt gives the fixture's stream a snapshot socket that answers
// sequence seq with one chunk per batch of batches.
func (f *seqFixture) withSnapshotAt(seq int64, batches ...uint64) {
	chunks := make([][]byte, 0, len(batches))
	for _, b := range batches {
		chunks = append(chunks, poolPayload(b))
	}
	srv, err := snapshot.NewServer(snapshot.ServerConfig{Addr: "tcp://127.0.0.1:0"},
		snapshot.SourceFunc(func() (int64, [][]byte, bool) { return seq, chunks, true }), snapshot.Options{})
	require.NoError(f.t, err)
	f.closers = append(f.closers, srv.Close)
	f.useSnapshotClient(srv.Endpoint(), snapshot.ClientConfig{Backoff: 1})
}

// A snapshot whose sequence (5,000) is far ahead of the live stream that
// asked for it (at most 4: vLLM's recorder answers with the last sequence
// its publisher sent, a few in flight beyond what the router saw) is
// refused (snapshot_errors_total{reason="seq_out_of_range"}, a failed
// load) and the replay rebuilds the endpoint. Before, it was loaded: its
// watermark skipped every live message up to 5,000 as already applied.
func TestStreamSnapshotFarAheadOfTheLiveStreamRefused(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 10, "")
	defer f.close()
	f.withSnapshotAt(5000, 0, 1, 2, 3, 4, 9999)
	for s := uint64(0); s < 5; s++ {
		f.publish(s, s) // the first one starts the join, which loads the snapshot
	}
	require.Eventually(t, func() bool { return f.snapCount(snapFailed)+f.snapCount(snapLoaded) == 1 && !f.status().Replaying },
		poolWait, poolTick, f.logs.String())
	for s := uint64(5); s < 10; s++ {
		f.publish(s, s)
	}
	require.Eventually(t, func() bool { return f.held(9) }, poolWait, poolTick, f.logs.String())
	requireHeld(t, f.ix, seqID, 0, 9)
	require.False(t, f.held(9999), f.logs.String())
	require.Equal(t, 1.0, counter(f.p.snm.errors, seqID, snapRefusedSeq), f.logs.String())
	require.Equal(t, 1.0, f.snapCount(snapFailed))
	require.Equal(t, uint64(9), f.status().Applied)
}

// The same snapshot loaded before any live message on the connection:
// nothing bounds it then, so the first live message checks it as it checks
// a replay's watermark: 0 is more than ReplayLookahead behind 5,000, so the
// endpoint is cleared (counted under the same reason) and rebuilt from the
// live stream, whose messages are all applied.
func TestStreamSnapshotBeforeLiveCheckedByTheFirstLiveMessage(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 10, "")
	defer f.close()
	f.withSnapshotAt(5000, 9999)
	f.st.onConnect(false) // joins before any live message: loads the snapshot
	require.Eventually(t, func() bool { return f.snapCount(snapLoaded) == 1 && !f.status().Replaying },
		poolWait, poolTick, f.logs.String())
	require.True(t, f.held(9999))
	for s := uint64(0); s < 10; s++ {
		f.publish(s, s)
	}
	require.Eventually(t, func() bool { return f.held(9) }, poolWait, poolTick, f.logs.String())
	requireHeld(t, f.ix, seqID, 0, 9)
	require.False(t, f.held(9999), f.logs.String())
	require.Equal(t, 1.0, counter(f.p.snm.errors, seqID, snapRefusedSeq), f.logs.String())
	require.Zero(t, f.count("errors", opReplayProtocol))
	require.Zero(t, f.count("dropped", string(dropAlreadyApplied)))
}

// A snapshot far behind the live sequence that asked for it (5 against
// 5,000: a stale recorder) is refused and the replay window rebuilds the
// endpoint. Before, it was loaded, the gap 6..4,999 behind it was replayed,
// the buffer no longer held it, so the snapshot was loaded again, round
// after round, and the live stream never applied.
func TestStreamSnapshotFarBehindTheLiveStreamRefused(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 10, "")
	defer f.close()
	f.withSnapshotAt(5, 0, 1, 2, 3, 4, 5)
	for s := uint64(4990); s < 5000; s++ {
		f.hide(s, s)
	}
	f.publish(5000, 5000)
	f.wait(5000)
	requireHeld(t, f.ix, seqID, 4991, 5000)
	require.False(t, f.held(5), f.logs.String())
	require.Equal(t, 1.0, counter(f.p.snm.errors, seqID, snapRefusedSeq), f.logs.String())
	require.Equal(t, 1.0, f.snapCount(snapFailed))
	require.Zero(t, f.snapCount(snapLoaded))
}

// snapshotErrorsAtReport gives a snapshot client config whose
// OnAttemptError sends, for every failed attempt, the endpoint's
// snapshot_errors_total (all reasons) as it stands when the attempt is
// reported: after the pool counted it, before a Remove deletes the
// endpoint's series.
func snapshotErrorsAtReport(p **Pool, id string) (snapshot.ClientConfig, <-chan float64) {
	reports := make(chan float64, 64)
	return snapshot.ClientConfig{
		AttemptTimeout: time.Hour, Timeout: time.Hour, // the silent peer fails no attempt by itself
		OnAttemptError: func(*snapshot.Error) {
			reports <- seriesSum((*p).snm.errors, id)
		},
	}, reports
}

// A snapshot load kvroute supersedes (a Resync while the connect load
// waits for the engine's reply) is not the engine's failure: its
// interrupted attempt is counted under no snapshot_errors_total reason,
// and no load is counted failed. Before, it was counted as a receive
// error of an engine that had done nothing wrong.
func TestStreamSupersededSnapshotLoadCountsNoPeerError(t *testing.T) {
	defer leakcheck.Check(t)()
	raddr, _, stopR := startSilentPeer(t)
	defer stopR()
	saddr, accepted, stopS := startSilentPeer(t)
	defer stopS()
	var p *Pool
	cc, reports := snapshotErrorsAtReport(&p, seqID)
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayClient: replay.ClientConfig{IdleTimeout: time.Hour}}, 0, raddr)
	p = f.p
	defer f.close()
	f.useSnapshotClient(saddr, cc)
	f.st.onConnect(false) // the connect load
	await(t, accepted, "the snapshot request's connection")
	require.Equal(t, "snapshot", f.status().Phase)
	require.NoError(t, f.p.Resync(seqID))
	require.Zero(t, await(t, reports, "the superseded attempt's report"), f.logs.String())
	require.Zero(t, f.snapCount(snapFailed))
}

// Closing the pool while a snapshot load waits for the engine's reply
// counts no snapshot error.
func TestStreamSnapshotLoadCancelledOnCloseCountsNoPeerError(t *testing.T) {
	defer leakcheck.Check(t)()
	raddr, _, stopR := startSilentPeer(t)
	defer stopR()
	saddr, accepted, stopS := startSilentPeer(t)
	defer stopS()
	var p *Pool
	cc, reports := snapshotErrorsAtReport(&p, seqID)
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 0, raddr)
	p = f.p
	f.useSnapshotClient(saddr, cc)
	f.st.onConnect(false)
	await(t, accepted, "the snapshot request's connection")
	f.close() // waits for the load, which reported its attempt
	require.Zero(t, await(t, reports, "the cancelled attempt's report"), f.logs.String())
	require.Zero(t, seriesSum(f.p.snm.errors, seqID))
	require.Zero(t, f.snapCount(snapFailed))
}

// Removing an endpoint whose snapshot load waits for the engine's reply
// counts no snapshot error, not even in the moment before its series are
// deleted.
func TestPoolRemovedEndpointsSnapshotLoadCountsNoPeerError(t *testing.T) {
	defer leakcheck.Check(t)()
	raddr, _, stopR := startSilentPeer(t)
	defer stopR()
	saddr, accepted, stopS := startSilentPeer(t)
	defer stopS()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pub.Close()
	const id = "127.0.0.1:8000"
	var p *Pool
	cc, reports := snapshotErrorsAtReport(&p, id)
	cc.Limiter = snapshot.NewLimiter(2)
	p, logs := newTestPool(t, PoolConfig{TailProbeDelay: -1, Snapshot: SnapshotConfig{Client: cc}}, newPoolIndex(t))
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint(),
		ReplayAddress: raddr, SnapshotAddress: saddr}))
	await(t, accepted, "the snapshot request's connection")
	p.Remove(id)
	require.Zero(t, await(t, reports, "the cancelled attempt's report"), logs.String())
}
