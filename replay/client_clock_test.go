package replay

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/telemetry"
)

const clockWait = 10 * time.Second // generous: a loaded 2-core machine

// The pause between attempts is Backoff on the client's clock: the next
// attempt starts when a manual clock passes it, not before.
func TestReplayBackoffOnTheClientClock(t *testing.T) {
	defer leakcheck.Check(t)()
	refused := testport.Addr(t) // nothing listens, nor takes the port meanwhile
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

// Timeout bounds the whole replay even while it makes progress: a trickle
// that always sends another batch and never END is given up when the
// client's clock passes the timeout, with what arrived applied. The
// timeout is on a Manual clock, so it cannot fire before the first batch
// on a machine slow to connect.
func TestReplayOverallDeadline(t *testing.T) {
	defer leakcheck.Check(t)()
	var r *fakeRouter
	r = startFakeRouter(t, func(c *zmqx.Conn, start uint64, _ int) {
		for s := start; ; s++ {
			if sendBatch(c, s) != nil {
				return
			}
			select {
			case <-r.done:
				return
			case <-time.After(20 * time.Millisecond): // pacing the trickle
			}
		}
	})
	defer r.Close()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	const timeout = 300 * time.Millisecond
	cl, err := NewClient(ClientConfig{Limiter: NewLimiter(0), Timeout: timeout}, Options{Set: telemetry.Set{Clock: clk}})
	require.NoError(t, err)
	var col collector
	type result struct {
		res Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cl.Replay(context.Background(), r.Endpoint(), 0, col.apply)
		done <- result{res, err}
	}()
	require.Eventually(t, func() bool {
		col.mu.Lock()
		defer col.mu.Unlock()
		return len(col.seqs) >= 2
	}, clockWait, time.Millisecond, "the trickle is applied")
	clk.Advance(timeout - time.Millisecond)
	select {
	case got := <-done:
		t.Fatalf("ended before the timeout: %v", got.err)
	default:
	}
	clk.Advance(time.Millisecond)
	select {
	case got := <-done:
		var re *Error
		require.ErrorAs(t, got.err, &re)
		require.Equal(t, OpIncomplete, re.Op)
		require.ErrorIs(t, got.err, context.DeadlineExceeded)
		require.GreaterOrEqual(t, got.res.Batches, 2)
	case <-time.After(clockWait):
		t.Fatal("the trickle outlived the replay's timeout")
	}
}
