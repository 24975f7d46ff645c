package checkpoint

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// The peer bootstrap's hedge and progress watches run on the Options'
// clock: with two silent peers, the second is asked only when the Manual
// clock passes the hedge delay, and both are abandoned as stalled only
// when it passes their progress timeouts, whatever the wall clock does.
func TestPeerBootstrapHedgeAndStallOnTheClock(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	first, second := newStallingPeer(t, nil), newStallingPeer(t, nil)
	const progress = time.Hour // hedge delay: maxHedgeDelay (1 s)
	b := BootstrapConfig{Peers: []string{first.srv.URL, second.srv.URL}, Timeout: testBootstrapTimeout, ProgressTimeout: progress}
	clk := telemetry.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	reg := prometheus.NewRegistry()
	ix := newIndex(t, testBlockSize)
	type result struct {
		k   *Keeper
		err error
	}
	done := make(chan result, 1)
	go func() {
		k, err := Restore(context.Background(), ix, Config{}, b,
			Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t), Clock: clk}})
		done <- result{k, err}
	}()

	<-first.arrived
	clk.WaitForWaiters(2) // the hedge and the first peer's progress watch
	select {
	case <-second.arrived:
		t.Fatal("the second peer was asked before the clock reached the hedge delay")
	default:
	}
	clk.Advance(maxHedgeDelay)
	<-second.arrived // the hedge started

	clk.WaitForWaiters(3) // the hedge again and both progress watches
	clk.Advance(progress)
	res := <-done // both stalled
	require.NoError(t, res.err)
	defer res.k.Close()
	<-first.gone
	<-second.gone
	require.Equal(t, 2.0, restores(t, reg, "peer", "timeout"))
	require.Zero(t, ix.Stats().Endpoints)
}
