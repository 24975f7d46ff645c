package telemetry

import "time"

// Clock is a source of time and timers. Components with timeouts or
// periodic work take one (through Set) so that tests can drive them with
// Manual instead of waiting on the wall clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has passed, like time.NewTimer.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that sends the time every d, like
	// time.NewTicker; d must be positive.
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f in its own goroutine once d has passed, like
	// time.AfterFunc; the Timer's channel is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a Clock's one-shot timer, the subset of *time.Timer kvroute uses.
type Timer interface {
	// C is the channel the timer sends on (nil for AfterFunc timers).
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped a
	// pending timer.
	Stop() bool
	// Reset makes the timer fire after d; it reports whether the timer was
	// pending.
	Reset(d time.Duration) bool
}

// Ticker is a Clock's periodic timer, the subset of *time.Ticker kvroute
// uses.
type Ticker interface {
	// C is the channel the ticks are sent on; a slow reader drops ticks.
	C() <-chan time.Time
	// Stop turns the ticker off.
	Stop()
	// Reset changes the period to d and restarts the count.
	Reset(d time.Duration)
}

// Wall is the real clock (package time).
var Wall Clock = wallClock{}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

func (wallClock) NewTicker(d time.Duration) Ticker { return wallTicker{time.NewTicker(d)} }

func (wallClock) AfterFunc(d time.Duration, f func()) Timer { return wallTimer{time.AfterFunc(d, f)} }

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time        { return w.t.C }
func (w wallTimer) Stop() bool                 { return w.t.Stop() }
func (w wallTimer) Reset(d time.Duration) bool { return w.t.Reset(d) }

type wallTicker struct{ t *time.Ticker }

func (w wallTicker) C() <-chan time.Time   { return w.t.C }
func (w wallTicker) Stop()                 { w.t.Stop() }
func (w wallTicker) Reset(d time.Duration) { w.t.Reset(d) }
