package telemetry

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestManualFiresTimersInDueOrder(t *testing.T) {
	m := NewManual(epoch)
	late, early := m.NewTimer(2*time.Second), m.NewTimer(time.Second)
	require.Equal(t, 2, m.Waiters())
	m.Advance(1500 * time.Millisecond)
	require.Equal(t, epoch.Add(time.Second), <-early.C(), "a timer fires at its own due time")
	select {
	case <-late.C():
		t.Fatal("a timer not yet due fired")
	default:
	}
	m.Advance(time.Second)
	require.Equal(t, epoch.Add(2*time.Second), <-late.C())
	require.Equal(t, epoch.Add(2500*time.Millisecond), m.Now())
	require.Zero(t, m.Waiters())
}

func TestManualStopAndReset(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	require.True(t, tm.Stop())
	require.False(t, tm.Stop(), "a stopped timer is not pending")
	m.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	require.False(t, tm.Reset(time.Second), "Reset of a stopped timer reports it was not pending")
	m.Advance(time.Second)
	require.Equal(t, epoch.Add(time.Hour+time.Second), <-tm.C())
}

func TestManualTickerDropsTicksForASlowReader(t *testing.T) {
	m := NewManual(epoch)
	tk := m.NewTicker(time.Second)
	m.Advance(3 * time.Second)
	require.Equal(t, epoch.Add(time.Second), <-tk.C(), "the channel holds the first tick; later ones are dropped")
	m.Advance(time.Second)
	require.Equal(t, epoch.Add(4*time.Second), <-tk.C())
	tk.Reset(10 * time.Second)
	m.Advance(9 * time.Second)
	select {
	case <-tk.C():
		t.Fatal("Reset did not restart the period")
	default:
	}
	m.Advance(time.Second)
	require.Equal(t, epoch.Add(14*time.Second), <-tk.C())
	tk.Stop()
	require.Zero(t, m.Waiters())
}

func TestManualAfterFuncRunsOnItsOwnGoroutine(t *testing.T) {
	m := NewManual(epoch)
	ran := make(chan time.Time, 1)
	m.AfterFunc(time.Minute, func() { ran <- m.Now() })
	m.Advance(time.Minute)
	require.Equal(t, epoch.Add(time.Minute), <-ran)
}

func TestWaitForWaitersSeesTimersArmedByAnotherGoroutine(t *testing.T) {
	m := NewManual(epoch)
	fired := make(chan struct{})
	go func() {
		<-m.NewTimer(time.Second).C()
		close(fired)
	}()
	m.WaitForWaiters(1)
	m.Advance(time.Second)
	<-fired
}

func TestWallClockTimers(t *testing.T) {
	tm := Wall.NewTimer(time.Millisecond)
	<-tm.C()
	tk := Wall.NewTicker(time.Millisecond)
	<-tk.C()
	tk.Stop()
	done := make(chan struct{})
	Wall.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	require.False(t, Wall.Now().IsZero())
}

func TestManualArmedNamesTheDueTime(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	require.True(t, m.Armed(epoch.Add(time.Second)))
	require.False(t, m.Armed(epoch.Add(2*time.Second)))
	tm.Reset(2 * time.Second)
	require.False(t, m.Armed(epoch.Add(time.Second)), "a reset timer is due at its new time only")
	require.True(t, m.Armed(epoch.Add(2*time.Second)))
	m.Advance(2 * time.Second)
	<-tm.C()
	require.False(t, m.Armed(epoch.Add(2*time.Second)), "a fired timer is no longer armed")
}

// As with package time's timers (Go 1.23 on), a value sent before Stop or
// Reset is not received after it: a timer that fired unread and is reset
// fires again only at its new due time, and a stopped one not at all.
// A component written for the wall clock (no drain before Reset) must see
// no stale firing under Manual either.
func TestManualStopAndResetDiscardAnUnreadFiring(t *testing.T) {
	m := NewManual(epoch)
	noValue := func(c <-chan time.Time, msg string) {
		t.Helper()
		select {
		case v := <-c:
			t.Fatalf("%s: received %v", msg, v)
		default:
		}
	}
	wall := Wall.NewTimer(time.Hour)
	wall.Stop()
	noValue(wall.C(), "the wall clock's stopped timer")

	tm := m.NewTimer(time.Second)
	m.Advance(time.Second) // fires; nobody reads it
	require.False(t, tm.Reset(time.Second), "a fired timer is not pending")
	noValue(tm.C(), "a reset timer delivered its earlier firing")
	m.Advance(time.Second)
	require.Equal(t, epoch.Add(2*time.Second), <-tm.C(), "it fires at its new due time")

	m.Advance(time.Second)
	tm.Reset(time.Second)
	m.Advance(time.Second) // fires again, unread
	require.False(t, tm.Stop())
	noValue(tm.C(), "a stopped timer delivered its earlier firing")

	tk := m.NewTicker(time.Second)
	m.Advance(time.Second) // a tick, unread
	tk.Reset(time.Minute)
	noValue(tk.C(), "a reset ticker delivered a tick of its old period")
	m.Advance(time.Second) // a tick, unread
	m.Advance(time.Minute)
	tk.Stop()
	noValue(tk.C(), "a stopped ticker delivered a tick")
}

// TestManualConcurrentAdvancesAddUp: Advance from several goroutines at
// once moves the clock by the sum of their durations; each read the time
// and then set it, so two advances from the same reading counted once.
func TestManualConcurrentAdvancesAddUp(t *testing.T) {
	m := NewManual(epoch)
	const goroutines, each = 4, 500
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				m.Advance(time.Second)
			}
		})
	}
	wg.Wait()
	require.Equal(t, epoch.Add(goroutines*each*time.Second), m.Now())
}
