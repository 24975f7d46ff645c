package kvevents

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// resumeOutcomes lists every result of kvroute_kv_events_resumes_total.
var resumeOutcomes = []string{ResumeOK, ResumeWithGap, ResumeGapCleared, ResumeRestarted, ResumeUnverified,
	resumeSnapshot, resumeSuperseded}

// requireOneResume checks that the fixture's endpoint counted one resume,
// under want.
func (f *seqFixture) requireOneResume(want string) {
	f.t.Helper()
	for _, r := range resumeOutcomes {
		n := 0.0
		if r == want {
			n = 1
		}
		require.Equal(f.t, n, f.resumeCount(r), "%s\n%s", r, f.logs)
	}
}

// A resumed stream's position check (a replay from the position, which
// gets no answer here) is cut short because a live message waits for it:
// the endpoint is cleared, as for any cut-short replay whose gap stays
// open, and the resume is counted once, as gap_cleared. Before, the clear
// forgot the pending check and no outcome was counted at all.
func TestStreamResumeCheckCutShortCountsGapCleared(t *testing.T) {
	defer leakcheck.Check(t)()
	data := checkpointOf10(t)
	raddr, accepted, stop := startSilentPeer(t)
	defer stop()
	f := newSeqFixtureOn(t, PoolConfig{TailProbeDelay: -1, ReplayGrace: 200 * time.Millisecond}, 0, raddr,
		loaded(t, data))
	defer f.close()

	f.publish(30, 30) // adopts position 9 and starts its check; 30 is held
	await(t, accepted, "the check's connection")
	f.wait(30) // applied once the check is cut short
	require.Equal(t, 1.0, f.count("replays", replayCutShort), f.logs.String())
	require.False(t, f.held(0), "the restored entries were cleared")
	require.True(t, f.held(30))
	f.requireOneResume(ResumeGapCleared)
	require.False(t, f.resumeUnchecked())
	f.close()
	f.requireOneResume(ResumeGapCleared) // closing counts nothing more
}
