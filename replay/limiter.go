package replay

import (
	"context"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// DefaultConcurrency is the process-wide number of concurrent replays: at
// startup a router replays from every endpoint at once, and without a bound
// that fan-out overloads publishers and delays convergence.
const DefaultConcurrency = 8

// Limiter bounds how many replay attempts run at once. Share one Limiter
// between all clients of a process (DefaultLimiter does that by default). An
// attempt holds a slot from before its dial until its socket is closed; the
// backoff between attempts holds none. Waiting for a slot counts against the
// replay's deadline (failing with OpCapacity).
type Limiter struct {
	sem      *semaphore.Weighted
	size     int
	inFlight atomic.Int64
}

// NewLimiter returns a Limiter admitting n concurrent attempts (n <= 0 means
// DefaultConcurrency).
func NewLimiter(n int) *Limiter {
	if n <= 0 {
		n = DefaultConcurrency
	}
	return &Limiter{sem: semaphore.NewWeighted(int64(n)), size: n}
}

var (
	defaultLimiterOnce sync.Once
	defaultLimiter     *Limiter
)

// DefaultLimiter is the process-wide Limiter (DefaultConcurrency slots) used
// by clients whose config names none.
func DefaultLimiter() *Limiter {
	defaultLimiterOnce.Do(func() { defaultLimiter = NewLimiter(DefaultConcurrency) })
	return defaultLimiter
}

// Size is the number of slots.
func (l *Limiter) Size() int { return l.size }

// InFlight is the number of attempts holding a slot now.
func (l *Limiter) InFlight() int { return int(l.inFlight.Load()) }

func (l *Limiter) acquire(ctx context.Context) error {
	if err := l.sem.Acquire(ctx, 1); err != nil {
		return err
	}
	l.inFlight.Add(1)
	return nil
}

func (l *Limiter) release() {
	l.inFlight.Add(-1)
	l.sem.Release(1)
}
