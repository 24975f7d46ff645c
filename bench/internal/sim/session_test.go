package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A small seeded run of the session study: deterministic, and session
// affinity keeps agent sessions on their engine at least as often as the
// plain Router with events late; Dynamo's pin keeps every turn there.
func TestSessionStudySmall(t *testing.T) {
	base := DefaultConfig(MultiTurn, 0.6)
	base.GatewayReplicas = 1
	base.Fleet.Engines = 4
	sc := SessionScenarios(400)[3] // agent, events 2 s late
	run := func() []SessionResult {
		rs, err := RunSessionStudy(base, []SessionScenario{sc}, []float64{0.6}, SessionPolicies, 2)
		require.NoError(t, err)
		return rs
	}
	rs := run()
	require.Len(t, rs, 3)
	plain, sess, pin := rs[0], rs[1], rs[2]
	require.Equal(t, KVRoute, plain.Policy)
	for _, r := range rs {
		require.Equal(t, r.Requests, r.Completed, "%s", r.Policy)
	}
	require.GreaterOrEqual(t, sess.Stickiness, plain.Stickiness)
	require.InDelta(t, 1.0, pin.Stickiness, 1e-9, "a pinned session never moves within its TTL")
	again := run()
	for i := range rs {
		require.Equal(t, rs[i].TTFTP90, again[i].TTFTP90, "same seed, same result")
		require.Equal(t, rs[i].Stickiness, again[i].Stickiness)
	}
}
