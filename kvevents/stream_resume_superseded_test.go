package kvevents

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/replay"
)

// resumeUnchecked reports whether the fixture's stream has a recorded
// position whose check has not ended.
func (f *seqFixture) resumeUnchecked() bool {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	return f.st.s.rs.pending
}

// A stream resumed from a recorded position whose check (the replay from
// the position, which gets no answer here) is superseded before it ends —
// by a publisher restart or a Resync — counts its resume outcome as
// superseded, once; the close that ends the stream later counts nothing
// more. Before, such a resume was counted under no outcome at all.
func TestStreamResumeSupersededBeforeItsCheckEndsIsCounted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		supersede func(f *seqFixture)
	}{
		{"publisher restart", func(f *seqFixture) { f.publish(2, 2) }}, // below the live sequence: a restart
		{"resync", func(f *seqFixture) { require.NoError(f.t, f.p.Resync(seqID)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			raddr, accepted, stop := startSilentPeer(t)
			defer stop()
			f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayGrace: time.Hour,
				ReplayClient: replay.ClientConfig{IdleTimeout: time.Hour}}, 0, raddr)
			defer f.close()
			f.st.mu.Lock()
			f.st.s.rs.ensured, f.st.s.rs.hasEnsured = Position{Seq: 5, Digest: PayloadDigest(poolPayload(5))}, true
			f.st.mu.Unlock()
			f.publish(6, 6) // adopts the position and starts its check
			await(t, accepted, "the check's connection")
			require.Eventually(t, func() bool { return f.resumeUnchecked() && f.heldCount() == 1 },
				poolWait, poolTick, f.logs.String())

			tc.supersede(f)
			require.Equal(t, 1.0, f.resumeCount(resumeSuperseded), f.logs.String())
			for _, r := range []string{ResumeOK, ResumeWithGap, ResumeGapCleared, ResumeRestarted, ResumeUnverified, resumeSnapshot} {
				require.Zero(t, f.resumeCount(r), r)
			}
			require.False(t, f.resumeUnchecked())
			f.close()
			require.Equal(t, 1.0, f.resumeCount(resumeSuperseded), "closing counts no second outcome")
		})
	}
}
