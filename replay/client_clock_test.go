package replay

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/telemetry"
)

const clockWait = 10 * time.Second // generous: a loaded 2-core machine

// The pause between attempts is Backoff on the client's clock: the next
// attempt starts when a manual clock passes it, not before.
func TestReplayBackoffOnTheClientClock(t *testing.T) {
	defer leakcheck.Check(t)()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := l.Addr().String()
	require.NoError(t, l.Close())
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	var attempts atomic.Int64
	cl, err := NewClient(ClientConfig{Limiter: NewLimiter(0), Backoff: time.Minute, Timeout: time.Hour,
		OnAttemptError: func(*Error) { attempts.Add(1) }}, Options{Set: telemetry.Set{Clock: clk}})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, err := cl.Replay(context.Background(), refused, 0, (&collector{}).apply)
		errc <- err
	}()
	for n := int64(1); n <= 2; n++ {
		require.Eventually(t, func() bool { return attempts.Load() == n && clk.Waiters() == 2 }, clockWait, time.Millisecond,
			"attempt %d failed and the backoff is armed (beside the replay's timeout)", n)
		clk.Advance(time.Minute - time.Millisecond)
		require.Equal(t, n, attempts.Load(), "no attempt before the backoff")
		clk.Advance(time.Millisecond)
	}
	select {
	case err := <-errc:
		var re *Error
		require.ErrorAs(t, err, &re)
		require.Equal(t, OpNoProgress, re.Op)
		require.EqualValues(t, 3, attempts.Load())
	case <-time.After(clockWait):
		t.Fatal("the third attempt did not end the replay")
	}
	require.Zero(t, clk.Waiters(), "the replay's timers are released")
}

// Timeout bounds the whole replay on the client's clock: a publisher that
// never answers is given up when a manual clock passes it, with
// context.DeadlineExceeded, as with a wall-clock deadline.
func TestReplayTimeoutOnTheClientClock(t *testing.T) {
	defer leakcheck.Check(t)()
	var r *fakeRouter
	r = startFakeRouter(t, func(*zmqx.Conn, uint64, int) { r.wait() })
	defer r.Close()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	cl, err := NewClient(ClientConfig{Limiter: NewLimiter(0), Timeout: time.Hour, IdleTimeout: time.Hour},
		Options{Set: telemetry.Set{Clock: clk}})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, err := cl.Replay(context.Background(), r.Endpoint(), 0, (&collector{}).apply)
		errc <- err
	}()
	require.Eventually(t, func() bool { return len(r.Starts()) == 1 }, clockWait, time.Millisecond, "the request arrived")
	clk.Advance(time.Hour - time.Millisecond)
	select {
	case err := <-errc:
		t.Fatalf("ended before the timeout: %v", err)
	default:
	}
	clk.Advance(time.Millisecond)
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(clockWait):
		t.Fatal("the replay outlived its timeout")
	}
}
