package e2e

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// The accuracy step reads 0 error on the healthy fleet, catches the engine
// whose events are suppressed (missing entries, the inaccurate gauge, a
// resync) and reads exact predictions again once its events flow.
func TestAccuracyStepCatchesSuppressedEventsAndRecovers(t *testing.T) {
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, err := Options{Fast: true}.withDefaults()
	require.NoError(t, err)
	c, err := startCluster(ctx, o)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.close()) }()
	var out bytes.Buffer
	res, err := accuracy(ctx, c, o, &out)
	require.NoError(t, err, out.String())
	t.Log(out.String())

	require.Contains(t, c.endpointIDs(), res.Engine)
	require.Equal(t, 6.0, res.Healthy.Observed, out.String())
	require.Equal(t, res.Healthy.Observed, res.Healthy.Exact, "a healthy fleet: every prediction exact")
	require.Zero(t, res.Healthy.Missing)
	require.Zero(t, res.Healthy.Stale)
	require.False(t, res.Healthy.Inaccurate)

	require.Equal(t, 8.0, res.Fault.Observed)
	require.GreaterOrEqual(t, res.Fault.Missing, 2.0, "the engine reused blocks the index never heard of")
	require.True(t, res.Fault.Inaccurate)
	require.Equal(t, 1.0, res.Resyncs)

	require.Positive(t, res.Recovered.Observed)
	require.Equal(t, res.Recovered.Observed, res.Recovered.Exact, "events flow: exact again")
	require.False(t, res.Recovered.Inaccurate)
	require.Contains(t, out.String(), "POST /sim/suppress_kv_events?on=true")
}

func (c *cluster) endpointIDs() []string {
	var ids []string
	for _, e := range c.engines {
		ids = append(ids, e.id)
	}
	return ids
}
