package clockctx

import (
	"context"
	"sync"
	"time"

	"github.com/kvroute/kvroute/telemetry"
)

// timeoutCtx is context.WithTimeout on a telemetry clock: the context
// ends with context.DeadlineExceeded once clock has moved d forward, or
// with its parent. (Its Deadline is the parent's: the clock's time need not
// be the wall time the OS and the standard library compare deadlines with.)
type timeoutCtx struct {
	parent context.Context
	done   chan struct{}
	mu     sync.Mutex
	err    error
	timer  telemetry.Timer // set under mu
	stop   func() bool     // set under mu
}

// WithTimeout returns ctx bounded by d on clock, and the function that
// releases its timer (call it when done, as with context.WithTimeout).
func WithTimeout(ctx context.Context, clock telemetry.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	c := &timeoutCtx{parent: ctx, done: make(chan struct{})}
	c.mu.Lock() // the timer or the hook may fire before both are set
	defer c.mu.Unlock()
	c.timer = clock.AfterFunc(d, func() { c.end(context.DeadlineExceeded) })
	c.stop = context.AfterFunc(ctx, func() { c.end(ctx.Err()) })
	return c, func() { c.end(context.Canceled) }
}

// end ends the context with err, once, and releases the timer and hook.
func (c *timeoutCtx) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	timer, stop := c.timer, c.stop
	c.mu.Unlock()
	timer.Stop()
	stop()
}

func (c *timeoutCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *timeoutCtx) Done() <-chan struct{}       { return c.done }
func (c *timeoutCtx) Value(key any) any           { return c.parent.Value(key) }

// Err is the context's error. A parent that has ended ends the context
// here and now, as a standard library context's cancellation reaches its
// children before cancel returns: the hook context.AfterFunc runs in a
// goroutine of its own, and a caller that cancelled the parent and then
// asked Err (a retry loop deciding whether to try again) saw nil.
func (c *timeoutCtx) Err() error {
	if err := c.parent.Err(); err != nil {
		c.end(err) // a no-op when the context already ended
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Sleep waits d on clock or until ctx ends, whichever comes first, and
// reports whether the wait ran its course (false: ctx ended). The timer is
// released either way.
func Sleep(ctx context.Context, clock telemetry.Clock, d time.Duration) bool {
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return ctx.Err() == nil // both ready: the end wins, as a caller checks it next
	}
}
