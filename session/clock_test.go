package session_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
)

// steppedClock reads a wall time that a test steps back, as NTP may, with
// no monotonic reading to fall back on.
type steppedClock struct {
	telemetry.Clock
	now atomic.Int64
}

func (c *steppedClock) Now() time.Time { return time.Unix(0, c.now.Load()) }

// A session's turn recorded after the clock stepped back is its latest
// turn all the same: it replaces the endpoint recorded before the step
// instead of being taken for an older record and dropped.
func TestTurnAfterClockStepsBackReplacesTheSessionsEndpoint(t *testing.T) {
	clk := &steppedClock{Clock: telemetry.Wall}
	clk.now.Store(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	a, err := session.New(session.Config{TTL: time.Minute}, session.Options{Set: telemetry.Set{Clock: clk}})
	require.NoError(t, err)
	defer a.Close()
	a.Record("conv", "10.0.0.1:8000")
	clk.now.Add(-int64(time.Second)) // the clock steps back 1 s
	a.Record("conv", "10.0.0.2:8000")
	ep, ok := a.Endpoint("conv")
	require.True(t, ok)
	require.Equal(t, "10.0.0.2:8000", ep, "the latest turn's endpoint was dropped")
	clk.now.Add(int64(time.Minute)) // the turn's TTL runs from its record
	_, ok = a.Endpoint("conv")
	require.True(t, ok, "expired before its TTL")
	clk.now.Add(int64(time.Second) + 1)
	_, ok = a.Endpoint("conv")
	require.False(t, ok, "kept past its TTL")
}
