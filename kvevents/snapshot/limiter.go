package snapshot

import (
	"context"
	"sync"
)

// DefaultConcurrency is the process-wide number of snapshot loads at once:
// a snapshot is the engine's whole cache, so a router restarted in front
// of a large fleet must not ask every engine at the same moment.
const DefaultConcurrency = 4

// Limiter bounds how many snapshot attempts run at once across a process
// (like the replay client's limiter). An attempt holds a slot from before
// its dial until its reply is parsed; backoff holds none.
type Limiter struct{ slots chan struct{} }

// NewLimiter admits n concurrent attempts (n <= 0: DefaultConcurrency).
func NewLimiter(n int) *Limiter {
	if n <= 0 {
		n = DefaultConcurrency
	}
	return &Limiter{slots: make(chan struct{}, n)}
}

var (
	defaultOnce    sync.Once
	defaultLimiter *Limiter
)

// DefaultLimiter is the process-wide Limiter used by clients whose config
// names none.
func DefaultLimiter() *Limiter {
	defaultOnce.Do(func() { defaultLimiter = NewLimiter(DefaultConcurrency) })
	return defaultLimiter
}

// Size is the number of slots.
func (l *Limiter) Size() int { return cap(l.slots) }

// InFlight is the number of attempts holding a slot now.
func (l *Limiter) InFlight() int { return len(l.slots) }

func (l *Limiter) acquire(ctx context.Context) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Limiter) release() { <-l.slots }
