package replay

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// Slots go to waiters in arrival order, the queue is bounded, and waiting
// time is counted.
func TestLimiterFairBoundedQueue(t *testing.T) {
	defer leakcheck.Check(t)()
	l := NewLimiterQueue(1, 3)
	_, err := l.acquire(context.Background())
	require.NoError(t, err)
	order := make(chan int, 3)
	for i := range 3 {
		go func() {
			_, err := l.acquire(context.Background())
			if err == nil {
				order <- i
			}
		}()
		require.Eventually(t, func() bool { return l.Waiting() == i+1 }, 10*time.Second, time.Millisecond)
	}
	_, err = l.acquire(context.Background())
	require.True(t, errors.Is(err, ErrQueueFull), "a fourth waiter is refused, got %v", err)
	require.EqualValues(t, 1, l.Rejected())
	for want := range 3 {
		l.release()
		require.Equal(t, want, <-order, "first come, first served")
	}
	l.release()
	require.Zero(t, l.InFlight())
	require.Positive(t, l.WaitTotal())
}

// A waiter that gives up leaves the queue, and a slot granted as it gives
// up is passed on rather than lost.
func TestLimiterCancelledWaiterLeavesQueue(t *testing.T) {
	defer leakcheck.Check(t)()
	l := NewLimiterQueue(1, 8)
	_, err := l.acquire(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.acquire(ctx)
		done <- err
	}()
	require.Eventually(t, func() bool { return l.Waiting() == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	l.release()
	_, err = l.acquire(context.Background())
	require.NoError(t, err, "the slot was not lost")
	l.release()
}
