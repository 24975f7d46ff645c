package snapshot

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

const clockWait = 10 * time.Second // generous: a loaded 2-core machine

// Timeout bounds the whole load on the client's clock, as a replay's
// overall timeout does (package telemetry: a component's own timeouts run
// on its clock): an engine that keeps answering "unavailable" is given up
// when a manual clock passes Timeout, with context.DeadlineExceeded, not
// when wall time does. The backoff is on the clock too: no attempt starts
// before it has passed.
func TestFetchTimeoutOnTheClientClock(t *testing.T) {
	defer leakcheck.Check(t)()
	s := newServer(t, SourceFunc(func() (int64, [][]byte, bool) { return 0, nil, false }))
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	var attempts atomic.Int64
	c, err := NewClient(ClientConfig{Limiter: NewLimiter(1), Timeout: time.Hour, Backoff: time.Minute,
		OnAttemptError: func(*Error) { attempts.Add(1) }}, Options{Set: telemetry.Set{Clock: clk}})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Fetch(context.Background(), s.Endpoint())
		errc <- err
	}()
	require.Eventually(t, func() bool { return attempts.Load() == 1 && clk.Armed(clk.Now().Add(time.Minute)) },
		clockWait, time.Millisecond, "the first attempt failed and the backoff is armed")
	clk.Advance(time.Minute - time.Millisecond)
	require.EqualValues(t, 1, attempts.Load(), "no attempt before the backoff")
	clk.Advance(time.Hour - time.Minute + time.Millisecond)
	select {
	case err := <-errc:
		var e *Error
		require.ErrorAs(t, err, &e)
		require.True(t, e.Op == OpUnavailable || errors.Is(err, context.DeadlineExceeded), "the last attempt's error: %v", err)
	case <-time.After(clockWait):
		t.Fatal("the load outlived its Timeout on the client's clock")
	}
	require.Zero(t, clk.Waiters(), "the load's timers are released")
	require.NoError(t, s.Close())
}

// An attempt whose context ended (its deadline, the load's Timeout, the
// caller) reports why beside the closed socket's own error, so that a load
// stopped by its Timeout mid-connect reads as context.DeadlineExceeded.
func TestAttemptErrorNamesWhyItsContextEnded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	sock := errors.New("use of closed network connection")
	err := withCause(ctx, sock)
	require.ErrorIs(t, err, sock)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, sock, withCause(context.Background(), sock), "a live context adds nothing")
}
