package replay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultConcurrency is the process-wide number of concurrent replays: at
// startup a router replays from every endpoint at once, and without a bound
// that fan-out overloads publishers and delays convergence.
const DefaultConcurrency = 8

// DefaultMaxWaiting bounds how many attempts may queue for a slot.
const DefaultMaxWaiting = 1024

// ErrQueueFull is returned (wrapped in an OpCapacity *Error) when an attempt
// finds MaxWaiting attempts already queued for a slot.
var ErrQueueFull = errors.New("replay: too many replays waiting for a slot")

// Limiter bounds how many replay attempts run at once. Share one Limiter
// between all clients of a process (DefaultLimiter does that by default). An
// attempt holds a slot from before its dial until its socket is closed; the
// backoff between attempts holds none.
//
// Waiting attempts form one first-come first-served queue (a slot freed goes
// to the attempt that has waited longest, so no endpoint can be overtaken
// indefinitely), bounded by MaxWaiting: beyond it an attempt fails at once
// with ErrQueueFull rather than piling up. Waiting counts against the
// replay's deadline (failing with OpCapacity), and the total time spent
// waiting is kept (WaitTotal) and reported per attempt to
// ClientConfig.OnSlotWait.
type Limiter struct {
	size, maxWaiting int

	mu      sync.Mutex
	free    int
	waiters []chan struct{} // FIFO; a waiter is granted by closing its channel

	inFlight  atomic.Int64
	waiting   atomic.Int64
	waitNanos atomic.Int64
	rejected  atomic.Uint64
}

// NewLimiter returns a Limiter admitting n concurrent attempts (n <= 0 means
// DefaultConcurrency) with at most DefaultMaxWaiting queued.
func NewLimiter(n int) *Limiter { return NewLimiterQueue(n, DefaultMaxWaiting) }

// NewLimiterQueue is NewLimiter with at most maxWaiting attempts queued for a
// slot (maxWaiting <= 0 means DefaultMaxWaiting).
func NewLimiterQueue(n, maxWaiting int) *Limiter {
	if n <= 0 {
		n = DefaultConcurrency
	}
	if maxWaiting <= 0 {
		maxWaiting = DefaultMaxWaiting
	}
	return &Limiter{size: n, maxWaiting: maxWaiting, free: n}
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

// Waiting is the number of attempts queued for a slot now.
func (l *Limiter) Waiting() int { return int(l.waiting.Load()) }

// WaitTotal is the time all attempts together spent waiting for a slot.
func (l *Limiter) WaitTotal() time.Duration { return time.Duration(l.waitNanos.Load()) }

// Rejected counts attempts refused because the queue was full.
func (l *Limiter) Rejected() uint64 { return l.rejected.Load() }

// acquire takes a slot, waiting in FIFO order; it returns how long it waited.
func (l *Limiter) acquire(ctx context.Context) (time.Duration, error) {
	l.mu.Lock()
	if l.free > 0 && len(l.waiters) == 0 {
		l.free--
		l.mu.Unlock()
		l.inFlight.Add(1)
		return 0, nil
	}
	if len(l.waiters) >= l.maxWaiting {
		l.mu.Unlock()
		l.rejected.Add(1)
		return 0, ErrQueueFull
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()
	l.waiting.Add(1)
	start := time.Now() // wall time: the wait is only reported (see package telemetry)
	defer func() {
		l.waiting.Add(-1)
		l.waitNanos.Add(int64(time.Since(start)))
	}()
	select {
	case <-ch:
		l.inFlight.Add(1)
		return time.Since(start), nil
	case <-ctx.Done():
		l.mu.Lock()
		for i, w := range l.waiters {
			if w == ch {
				l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
				l.mu.Unlock()
				return time.Since(start), ctx.Err()
			}
		}
		l.mu.Unlock()
		// Granted while giving up: hand the slot on.
		l.inFlight.Add(1)
		l.release()
		return time.Since(start), ctx.Err()
	}
}

func (l *Limiter) release() {
	l.inFlight.Add(-1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiters) > 0 {
		ch := l.waiters[0]
		l.waiters = l.waiters[1:]
		close(ch)
		return
	}
	l.free++
}
