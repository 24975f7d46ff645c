package clockctx

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// A cancelled parent shows in the child's Err before cancel's caller does
// anything else, as with the standard library's contexts, and its Done is
// closed by then; the hook's own goroutine finds it ended and does nothing.
func TestParentEndShowsInErrAtOnce(t *testing.T) {
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	for range 1000 {
		parent, cancel := context.WithCancel(context.Background())
		ctx, release := WithTimeout(parent, clock, time.Hour)
		cancel()
		require.ErrorIs(t, ctx.Err(), context.Canceled)
		select {
		case <-ctx.Done():
		default:
			t.Fatal("Err reported the end but Done is open")
		}
		release()
		require.ErrorIs(t, ctx.Err(), context.Canceled, "the first end stays")
	}
}

// The clock's deadline ends the context with DeadlineExceeded, which a
// later end of the parent does not replace.
func TestDeadlineOnTheClock(t *testing.T) {
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx, release := WithTimeout(parent, clock, time.Second)
	defer release()
	require.NoError(t, ctx.Err())
	clock.Advance(time.Second)
	<-ctx.Done()
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	cancel()
	require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
}

// Sleep reports false for a context that has ended, and true once the
// clock has moved its time on a live one.
func TestSleep(t *testing.T) {
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	parent, cancel := context.WithCancel(context.Background())
	ctx, release := WithTimeout(parent, clock, time.Hour)
	defer release()
	done := make(chan bool, 1)
	go func() { done <- Sleep(ctx, clock, time.Second) }()
	clock.WaitForWaiters(2) // the context's deadline and the sleep
	clock.Advance(time.Second)
	require.True(t, <-done)
	cancel()
	require.False(t, Sleep(ctx, clock, time.Second))
}
