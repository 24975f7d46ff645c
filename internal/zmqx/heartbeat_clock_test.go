package zmqx

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// Heartbeats run on Options.Clock: on a manual clock a PING goes out when
// the clock passes the interval, and a silent peer is declared dead when it
// passes the timeout of the unanswered PING, with no wall time waited.
func TestHeartbeatRunsOnTheOptionsClock(t *testing.T) {
	defer leakcheck.Check(t)()
	peer := startPingPeer(t, false)
	defer peer.srv.Stop()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	o := Options{HeartbeatInterval: time.Minute, HeartbeatTimeout: 2 * time.Minute, Clock: clk}
	s := NewSub(context.Background(), o, nil)
	defer CloseDrain(s)
	require.NoError(t, Dial(s, peer.srv.Addr())) // returns once the handshake is done
	require.Eventually(t, func() bool { return clk.Waiters() == 1 }, 10*time.Second, time.Millisecond,
		"the PING ticker is armed on the clock")

	clk.Advance(time.Minute)
	select {
	case <-peer.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no PING at one interval")
	}
	require.Eventually(t, func() bool { return clk.Waiters() == 2 }, 10*time.Second, time.Millisecond,
		"the unanswered PING's timeout is armed")
	errc := make(chan error, 1)
	go func() {
		_, _, err := Recv(s)
		errc <- err
	}()
	clk.Advance(2 * time.Minute)
	select {
	case err := <-errc:
		require.True(t, isGuardErr(err, ErrPeerDead), "got %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the silent peer was not declared dead at the timeout")
	}
}
