package kvevents

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/replay"
)

// dropQueued is what the receiver does with live message seq when its
// worker's queue is full (receiveOpen): the wire watermark moves, the
// message is dropped and counted, and the stream catches up by replay.
func (f *seqFixture) dropQueued(seq uint64) {
	f.hide(seq, seq)
	f.st.lastSeen.Store(seq)
	f.st.seen.Store(true)
	f.st.liveConn.Store(true)
	f.st.queueFull.Inc()
	f.st.requestCatchUp()
}

// A resumed stream (position 9) whose check failed — its replay socket
// refused it, a probe that starts no cooldown — catches up after a queue
// dropped live message 30, from a replay socket now serving on that
// address: the catch-up is the position's check. With the position in the
// buffer it is confirmed (resumed) and the restored entries stay; without
// it the resume ends as the check does on a gap: entries kept
// (resumed_with_gap), or with ClearOnResumeGap cleared (gap_cleared).
// Before, the catch-up replayed from 10 without a look at the position:
// it counted no outcome, and on a gap it cleared the restored entries.
func TestStreamCatchUpChecksPendingResume(t *testing.T) {
	defer leakcheck.Check(t)()
	data := checkpointOf10(t)
	for _, tc := range []struct {
		name       string
		first      uint64 // the oldest batch the buffer holds
		clear      bool
		want       string
		keptBefore bool // the restored batches 0..9 stay
	}{
		{"position buffered", 9, false, ResumeOK, true},
		{"gap kept", 20, false, ResumeWithGap, true},
		{"gap cleared", 20, true, ResumeGapCleared, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := refusedAddr(t)
			f := newSeqFixtureOn(t, PoolConfig{TailProbeDelay: -1, ClearOnResumeGap: tc.clear,
				ReplayClient: replay.ClientConfig{MaxAttemptsWithoutProgress: 1, Backoff: 1}}, 0, addr, loaded(t, data))
			defer f.close()
			f.st.onConnect(false) // adopts position 9; its check is refused
			require.Eventually(t, func() bool {
				return counter(f.p.sm.Probes, seqID, probeFailed) == 1 && !f.status().Replaying
			}, poolWait, poolTick, f.logs.String())
			require.True(t, f.resumeUnchecked())

			f.buf = replay.NewBuffer(40)
			srv, err := replay.NewServer(replay.ServerConfig{Addr: strings.TrimPrefix(addr, "tcp://")}, f.buf, replay.Options{})
			require.NoError(t, err)
			f.srv = srv
			for s := tc.first; s < 30; s++ {
				f.hide(s, s)
			}
			f.dropQueued(30)
			f.wait(30)

			f.requireOneResume(tc.want)
			require.False(t, f.resumeUnchecked())
			for s := uint64(0); s < 10; s++ {
				require.Equal(t, tc.keptBefore, f.held(s), "restored batch %d\n%s", s, f.logs)
			}
			for s := max(tc.first, 10); s <= 30; s++ {
				require.True(t, f.held(s), "batch %d\n%s", s, f.logs)
			}
			require.Zero(t, f.count("restarts"))
		})
	}
}
