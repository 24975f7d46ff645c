package zmqx

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// A peer that completes the handshake and then freezes (reads nothing,
// sends nothing) while a message larger than the kernel's buffers is being
// written to it, with no WriteTimeout: the write blocks holding the write
// lock, so no PING can go out. The heartbeat still declares the peer dead
// once it has waited its timeout for the lock with nothing arriving, and
// closes the connection: the write fails and ReadMsg fails with
// ErrPeerDead, instead of both, and the heartbeat, blocking forever.
func TestListenerHeartbeatFailsAPeerFrozenUnderABlockedWrite(t *testing.T) {
	defer leakcheck.Check(t)()
	_, c, closeAll := acceptSlowReader(t, Options{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond})
	defer closeAll()

	wrote := make(chan error, 1)
	go func() { wrote <- c.WriteMsg(make([]byte, 32<<20)) }() // beyond any loopback buffers
	errc := readMsgAsync(c)
	select {
	case err := <-wrote:
		require.Error(t, err, "the frozen peer read nothing, so the write cannot have completed")
	case <-time.After(30 * time.Second):
		t.Fatal("the write to a frozen peer stayed blocked: the heartbeat never declared it dead")
	}
	select {
	case err := <-errc:
		require.True(t, isGuardErr(err, ErrPeerDead), "got %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("ReadMsg did not fail after the peer was declared dead")
	}
}

// While a write blocked on a peer that reads nothing holds the write lock,
// the PING waiting for it is judged on Options.Clock as a sent PING is:
// traffic from the peer within the timeout (here a PING of its own, read by
// ReadMsg, whose PONG then waits for the lock too) keeps the peer alive
// for another timeout, and a timeout with nothing arrived declares it
// dead, which ends the write.
func TestHeartbeatWaitForTheWriteLockCountsTraffic(t *testing.T) {
	defer leakcheck.Check(t)()
	t0 := time.Unix(1_800_000_000, 0)
	clk := telemetry.NewManual(t0)
	raw, c, closeAll := acceptSlowReader(t, Options{HeartbeatInterval: time.Minute, HeartbeatTimeout: 2 * time.Minute, Clock: clk})
	defer closeAll()
	require.Equal(t, 1, clk.WaitForWaiters(1), "the PING ticker")

	wrote := make(chan error, 1)
	go func() { wrote <- c.WriteMsg(make([]byte, 32<<20)) }() // beyond any loopback buffers
	require.Eventually(t, func() bool { return len(c.g.wmu) == 1 }, 20*time.Second, time.Millisecond, "the write holds the lock")
	clk.Advance(time.Minute)
	require.Eventually(t, func() bool { return clk.Armed(t0.Add(3 * time.Minute)) }, 20*time.Second, time.Millisecond,
		"the PING waits for the lock at most the timeout")

	errc := readMsgAsync(c)
	rb := c.g.hb.readBytes.Load()
	_, err := raw.Write(zmtpCommand("PING", []byte{0, 0}))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.g.hb.readBytes.Load() > rb }, 20*time.Second, time.Millisecond, "the peer's PING is read")
	clk.Advance(2 * time.Minute)
	require.Eventually(t, func() bool { return clk.Armed(t0.Add(5 * time.Minute)) }, 20*time.Second, time.Millisecond,
		"traffic within the timeout: the wait goes on for another")
	select {
	case err := <-wrote:
		t.Fatalf("the write ended (%v) with the peer alive", err)
	default:
	}

	clk.Advance(2 * time.Minute)
	select {
	case err := <-wrote:
		require.Error(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("a timeout with nothing arrived did not declare the peer dead")
	}
	select {
	case err := <-errc:
		require.Error(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("ReadMsg, waiting to PONG, did not fail with the connection")
	}
}
