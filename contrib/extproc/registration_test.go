package extproc

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/telemetry"
)

// TestCloseUnregistersMetrics checks the registration policy: Close
// unregisters what New registered, so a second Server can be built on the
// same registry.
func TestCloseUnregistersMetrics(t *testing.T) {
	regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
		s, err := New(Config{}, staticSource{}, Options{Set: telemetry.Set{Registerer: reg}})
		require.NoError(t, err)
		return s.Close
	})
}

// staticSource is a Picker that finds no endpoint, for tests that never
// pick.
type staticSource struct{}

func (staticSource) Pick(context.Context, *kvroute.Request, []kvroute.Endpoint) (*kvroute.Decision, error) {
	return nil, kvroute.ErrNoEndpoints
}

// readinessProbe reports ready and tells the test of every question, so the
// test knows when a tick was taken.
type readinessProbe struct{ asked chan struct{} }

func (p readinessProbe) NotReady() string {
	p.asked <- struct{}{}
	return ""
}

// FollowReadiness asks on the Options' clock: nothing more is asked until
// the Manual clock passes the interval, and each interval asks once.
func TestFollowReadinessTicksOnTheClock(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := telemetry.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(Config{}, staticSource{}, Options{Set: telemetry.Set{Clock: clk}})
	require.NoError(t, err)
	defer s.Close()
	s.SetEndpoints([]kvroute.Endpoint{{ID: "127.0.0.1:1"}})
	probe := readinessProbe{asked: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.FollowReadiness(ctx, probe, time.Minute) }()
	defer func() { cancel(); <-done }()

	<-probe.asked // at once
	clk.WaitForWaiters(1)
	select {
	case <-probe.asked:
		t.Fatal("asked again before the clock moved")
	default:
	}
	clk.Advance(time.Minute)
	<-probe.asked // the tick on the Manual clock
	clk.WaitForWaiters(1)
	clk.Advance(time.Minute)
	<-probe.asked
}
