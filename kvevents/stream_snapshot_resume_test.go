package kvevents

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// The tests of a stream resumed from a recorded position (a checkpoint)
// whose check finds the position gone from the replay buffer, so that the
// engine's snapshot is asked for, and whose snapshot load fails or is
// refused.

// checkpointOf10 is the index of a router that applied batches 0..9 of
// seqID, as a checkpoint file holds it (its position: 9).
func checkpointOf10(t *testing.T) []byte {
	t.Helper()
	f := newSeqFixture(t, PoolConfig{}, 0, "")
	for s := uint64(0); s < 10; s++ {
		f.publish(s, s)
	}
	f.wait(9)
	data := snap(t, f.ix)
	f.close()
	return data
}

// resumedFixture is a fixture on the checkpoint's index whose replay
// buffer holds batches 20..29 only: the position (9) left it.
func resumedFixture(t *testing.T, cfg PoolConfig, checkpoint []byte) *seqFixture {
	f := newSeqFixtureOn(t, cfg, 40, "", loaded(t, checkpoint))
	for s := uint64(20); s < 30; s++ {
		f.hide(s, s)
	}
	return f
}

// resumeCount is kvroute_kv_events_resumes_total{result} of the fixture's
// endpoint.
func (f *seqFixture) resumeCount(result string) float64 {
	return counter(f.p.rm.resumes, seqID, result)
}

// refusedAddr is a loopback TCP address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "tcp://" + addr
}

// The snapshot fetch fails (the engine answers "unavailable" until the
// load's deadline) and, meanwhile, the replay buffer holds the position
// again: the position is checked again without the snapshot, its digest
// matches, and the restored entries stay with batches 10..30 replayed on
// top of them, counted once as resumed. Before, the failed load cleared
// the endpoint and rebuilt it from 0, after counting engine_snapshot.
func TestStreamResumedSnapshotFetchFailsPositionReplayed(t *testing.T) {
	defer leakcheck.Check(t)()
	data := checkpointOf10(t)
	f := resumedFixture(t, PoolConfig{}, data)
	defer f.close()
	entered, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv, err := snapshot.NewServer(snapshot.ServerConfig{Addr: "tcp://127.0.0.1:0"},
		snapshot.SourceFunc(func() (int64, [][]byte, bool) {
			once.Do(func() { close(entered) })
			<-gate
			return 0, nil, false
		}), snapshot.Options{})
	require.NoError(t, err)
	f.closers = append(f.closers, srv.Close)
	defer close(gate) // before the server closes
	f.useSnapshotClient(srv.Endpoint(), snapshot.ClientConfig{Backoff: 1, Timeout: 200 * time.Millisecond})

	f.publish(30, 30) // live: the position's check starts, finds 20 first, asks for the snapshot
	select {
	case <-entered:
	case <-time.After(poolWait):
		t.Fatalf("the snapshot was never asked for\n%s", f.logs)
	}
	for s := uint64(9); s <= 30; s++ { // the buffer holds the position again
		f.hide(s, s)
	}
	gate <- struct{}{} // this answer and every later one: unavailable

	f.wait(30)
	for s := uint64(0); s <= 30; s++ {
		require.True(t, f.held(s), "batch %d\n%s", s, f.logs)
	}
	require.Equal(t, 1.0, f.snapCount(snapFailed), f.logs.String())
	require.Equal(t, 1.0, f.resumeCount(ResumeOK), f.logs.String())
	require.Zero(t, f.resumeCount(resumeSnapshot))
	require.Zero(t, f.count("restarts"))
	require.Equal(t, sourceResumed, f.status().IndexSource)
}

// The snapshot socket refuses connections and the replay buffer still
// lacks the position: the check is made again without the snapshot and
// ends as the gap path of a resumed stream with no snapshot does — the
// restored entries kept under resumed_with_gap, or cleared under
// gap_cleared with ClearOnResumeGap — and the window 20..30 applies.
func TestStreamResumedSnapshotRefusedKeepsEntriesOnGap(t *testing.T) {
	defer leakcheck.Check(t)()
	data := checkpointOf10(t)
	for _, clear := range []bool{false, true} {
		resumeRefused(t, data, clear)
	}
}

// resumeRefused runs TestStreamResumedSnapshotRefusedKeepsEntriesOnGap's
// case with ClearOnResumeGap set to clear.
func resumeRefused(t *testing.T, data []byte, clear bool) {
	f := resumedFixture(t, PoolConfig{ClearOnResumeGap: clear}, data)
	defer f.close()
	f.useSnapshotClient(refusedAddr(t), snapshot.ClientConfig{Backoff: 1, AttemptTimeout: 50 * time.Millisecond,
		Timeout: 100 * time.Millisecond})
	f.publish(30, 30)
	f.wait(30)
	for s := uint64(20); s <= 30; s++ {
		require.True(t, f.held(s), "batch %d\n%s", s, f.logs)
	}
	require.False(t, f.held(15), "lost batches are not invented")
	require.Equal(t, 1.0, f.snapCount(snapFailed), f.logs.String())
	require.Zero(t, f.resumeCount(resumeSnapshot))
	if clear {
		require.Equal(t, 1.0, f.resumeCount(ResumeGapCleared), f.logs.String())
		require.False(t, f.held(0), "cleared: the restored entries are gone")
	} else {
		require.Equal(t, 1.0, f.resumeCount(ResumeWithGap), f.logs.String())
		for s := uint64(0); s < 10; s++ {
			require.True(t, f.held(s), "restored batch %d\n%s", s, f.logs)
		}
	}
}

// The resume outcome of a position replaced by the engine's snapshot is
// counted once the load ends: engine_snapshot when it is loaded, and
// gap_cleared when the reply was refused after the entries were cleared
// for it (an undecodable chunk), the endpoint then rebuilt from the
// replay window.
func TestStreamResumedSnapshotOutcomeCountedWhenTheLoadEnds(t *testing.T) {
	defer leakcheck.Check(t)()
	data := checkpointOf10(t)
	for _, broken := range []bool{false, true} {
		resumeLoaded(t, data, broken)
	}
}

// resumeLoaded runs TestStreamResumedSnapshotOutcomeCountedWhenTheLoadEnds's
// case with a broken chunk or not.
func resumeLoaded(t *testing.T, data []byte, broken bool) {
	f := resumedFixture(t, PoolConfig{}, data)
	defer f.close()
	chunks := make([][]byte, 0, 31)
	for s := uint64(0); s <= 30; s++ {
		chunks = append(chunks, poolPayload(s))
	}
	if broken {
		chunks[15] = []byte("not msgpack")
	}
	srv, err := snapshot.NewServer(snapshot.ServerConfig{Addr: "tcp://127.0.0.1:0"},
		snapshot.SourceFunc(func() (int64, [][]byte, bool) { return 30, chunks, true }), snapshot.Options{})
	require.NoError(t, err)
	f.closers = append(f.closers, srv.Close)
	f.useSnapshotClient(srv.Endpoint(), snapshot.ClientConfig{Backoff: 1})
	f.publish(30, 30)
	f.wait(30)
	if broken {
		require.Equal(t, 1.0, f.snapCount(snapFailed), f.logs.String())
		require.Equal(t, 1.0, f.resumeCount(ResumeGapCleared), f.logs.String())
		require.Zero(t, f.resumeCount(resumeSnapshot))
		require.False(t, f.held(0), "rebuilt from the window")
		for s := uint64(20); s <= 30; s++ {
			require.True(t, f.held(s), "batch %d\n%s", s, f.logs)
		}
		return
	}
	require.Equal(t, 1.0, f.snapCount(snapLoaded), f.logs.String())
	require.Equal(t, 1.0, f.resumeCount(resumeSnapshot), f.logs.String())
	require.Zero(t, f.resumeCount(ResumeGapCleared))
	for s := uint64(0); s <= 30; s++ {
		require.True(t, f.held(s), "batch %d\n%s", s, f.logs)
	}
	require.Equal(t, sourceSnapshot, f.status().IndexSource)
}

// A fallback replay runs even where the snapshot's cooldown is over by the
// time its first batch shows that the buffer lost the range (a replay that
// waited that long for a slot; here a cooldown of 1 ns): it rebuilds from
// the window instead of going back to a load, so the cooldown is not all
// that keeps a broken snapshot socket from looping with the replay.
func TestStreamSnapshotFallbackReplayLoadsNoSnapshot(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{ReplayCooldown: time.Nanosecond}, 10, "")
	defer f.close()
	f.useSnapshotClient(refusedAddr(t), snapshot.ClientConfig{Backoff: 1, AttemptTimeout: 50 * time.Millisecond,
		Timeout: 100 * time.Millisecond})
	for s := uint64(0); s < 20; s++ {
		f.hide(s, s)
	}
	f.publish(20, 20) // joining: a load, refused, then the replay from 0 finds 11 first
	f.wait(20)
	require.True(t, f.held(11) && f.held(20), f.logs.String())
	require.False(t, f.held(9))
	require.Equal(t, 1.0, f.snapCount(snapFailed), f.logs.String())
	require.Zero(t, f.count("replays", replaySnapshot), f.logs.String())
	require.Equal(t, 1.0, f.count("replays", replayPartial), f.logs.String())
	require.Equal(t, sourceReplay, f.status().IndexSource)
}

// The engine's snapshot socket answers for another publisher lifetime than
// the live stream's (pidB against pidA): the reply is refused
// (publisher_mismatch) before any of it is applied, like a reply not
// understood, so the restored entries are left as they were and the
// position is checked again without the snapshot: kept under
// resumed_with_gap, with the window 20..30 on top. Before, the endpoint
// was cleared for the snapshot before its identity was looked at, and the
// refusal then rebuilt it from the window under gap_cleared.
func TestStreamResumedSnapshotOfAnotherPublisherKeepsEntries(t *testing.T) {
	defer leakcheck.Check(t)()
	data := checkpointOf10(t)
	f := resumedFixture(t, PoolConfig{}, data)
	defer f.close()
	eng := &fakeEngineState{last: 30, base: 1000} // another lifetime's blocks
	f.withSnapshotOf(eng, pidB)
	f.publishID(30, pidA) // live: the position's check finds 20 first and asks for the snapshot
	f.wait(30)
	for s := uint64(0); s < 10; s++ {
		require.True(t, f.held(s), "restored batch %d\n%s", s, f.logs)
	}
	for s := uint64(20); s <= 30; s++ {
		require.True(t, f.held(s), "batch %d\n%s", s, f.logs)
	}
	require.False(t, f.held(1000), "the other publisher's snapshot was applied\n%s", f.logs)
	require.Equal(t, 1.0, counter(f.p.snm.errors, seqID, snapRefusedPublisher), f.logs.String())
	require.Equal(t, 1.0, f.snapCount(snapFailed), f.logs.String())
	require.Equal(t, 1.0, f.resumeCount(ResumeWithGap), f.logs.String())
	require.Zero(t, f.resumeCount(ResumeGapCleared))
	require.Zero(t, f.resumeCount(resumeSnapshot))
}
