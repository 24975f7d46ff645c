package testport

import (
	"net"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// draws returns a draw function that answers ports (as offsets from Min)
// in order, then fails the test.
func draws(t *testing.T, ports ...int) func(int) int {
	i := 0
	return func(n int) int {
		if i == len(ports) {
			t.Fatalf("more draws than the %d planned", len(ports))
		}
		p := ports[i] - Min
		i++
		require.Less(t, p, n, "port %d is out of the drawn range", ports[i-1])
		return p
	}
}

func realLow() int { low, _ := EphemeralRange(); return low }

func listen(t *testing.T, host string, port int) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// A port from Port lies between Min and the ephemeral range, and binds.
func TestPortIsBelowTheEphemeralRangeAndFree(t *testing.T) {
	low, high := EphemeralRange()
	require.Less(t, low, high)
	seen := map[int]bool{}
	for range 20 {
		p := Port(t)
		require.GreaterOrEqual(t, p, Min)
		require.Less(t, p, low)
		require.False(t, seen[p], "port %d returned twice", p)
		seen[p] = true
	}
	a := Addr(t)
	host, _, err := net.SplitHostPort(a)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	l, err := net.Listen("tcp", a)
	require.NoError(t, err)
	require.NoError(t, l.Close())
}

// A drawn port something listens on is skipped for the next draw.
func TestFindSkipsABusyPort(t *testing.T) {
	busy, free := Port(t), Port(t)
	listen(t, "127.0.0.1", busy)
	f := &finder{low: realLow, draw: draws(t, busy, free)}
	p, err := f.find(Options{})
	require.NoError(t, err)
	require.Equal(t, free, p)
}

// With offsets and hosts, every port p+offset must be free on every host:
// one busy on the second host alone rejects the draw. The ports returned
// are not returned again, whichever offset drew them.
func TestFindChecksEveryHostAndOffset(t *testing.T) {
	a, err := Find(Options{Hosts: []string{"127.0.0.1", "127.0.0.2"}, Offsets: []int{0, 1}})
	require.NoError(t, err)
	b, err := Find(Options{Hosts: []string{"127.0.0.1", "127.0.0.2"}, Offsets: []int{0, 1}})
	require.NoError(t, err)
	require.Less(t, a+1, realLow())
	l := listen(t, "127.0.0.2", b+1)

	f := &finder{low: realLow, draw: draws(t, b, a)}
	p, err := f.find(Options{Hosts: []string{"127.0.0.1", "127.0.0.2"}, Offsets: []int{0, 1}})
	require.NoError(t, err)
	require.Equal(t, a, p, "b+1 is busy on 127.0.0.2")
	require.NoError(t, l.Close())

	f.draw = draws(t, a+1, a, b)
	p, err = f.find(Options{})
	require.NoError(t, err)
	require.Equal(t, b, p, "a and a+1 were returned already")
}

// When every draw is busy, Find gives up with the bind's error.
func TestFindGivesUpWhenEveryDrawIsBusy(t *testing.T) {
	busy := Port(t)
	listen(t, "127.0.0.1", busy)
	f := &finder{low: realLow, draw: func(int) int { return busy - Min }}
	_, err := f.find(Options{})
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.ErrorContains(t, err, "after 1000 draws")
}

// Offsets that are negative, or that leave no port p with p+offset below
// the ephemeral range, are refused.
func TestFindRefusesOptionsWithoutRoom(t *testing.T) {
	f := &finder{low: func() int { return Min + 500 }, draw: func(int) int { t.Fatal("drew"); return 0 }}
	_, err := f.find(Options{Offsets: []int{0, -1}})
	require.ErrorContains(t, err, "negative")
	_, err = f.find(Options{Offsets: []int{0, 500}})
	require.ErrorContains(t, err, "no port p")
	f.low = func() int { return Min }
	_, err = f.find(Options{})
	require.ErrorContains(t, err, "no port p")
}

// The ports kept from returning again are bounded: the oldest go first.
func TestFindRemembersABoundedNumberOfPorts(t *testing.T) {
	f := &finder{}
	for p := range remember + 10 {
		f.giveLocked(Min+p, []int{0})
	}
	f.giveLocked(Min+remember+9, []int{0}) // again: no second entry
	require.Len(t, f.given, remember)
	require.Len(t, f.order, remember)
	require.False(t, f.given[Min+9])
	require.True(t, f.given[Min+10])
	require.True(t, f.takenLocked(Min+5, []int{0, 6}), "Min+11 is remembered")
	require.False(t, f.takenLocked(Min+5, []int{0, 1}))
}

// The range file is two numbers, low before high; anything else is refused
// (and EphemeralRange falls back to Linux's default).
func TestParseRange(t *testing.T) {
	low, high, err := parseRange("32768\t60999\n")
	require.NoError(t, err)
	require.Equal(t, [2]int{32768, 60999}, [2]int{low, high})
	for _, bad := range []string{"", "32768", "1 2 3", "a 60999", "32768 b", "60999 32768", "0 10", "1 70000"} {
		_, _, err := parseRange(bad)
		require.Error(t, err, "%q", bad)
	}
}
