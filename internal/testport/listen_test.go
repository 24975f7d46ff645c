package testport

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A listener from Listen holds a port below the ephemeral range; once it is
// closed a dial to its address is refused.
func TestListenHoldsAPortBelowTheEphemeralRange(t *testing.T) {
	l := Listen(t, "127.0.0.1")
	a := l.Addr().(*net.TCPAddr)
	require.Equal(t, "127.0.0.1", a.IP.String())
	require.GreaterOrEqual(t, a.Port, Min)
	require.Less(t, a.Port, realLow())
	c, err := net.Dial("tcp", a.String())
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, l.Close())
	_, err = net.Dial("tcp", a.String())
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
}

// failFirst binds with net.Listen after failing the first n binds with err.
func failFirst(n int, err error) (func(string, string) (net.Listener, error), *int) {
	calls := 0
	return func(network, addr string) (net.Listener, error) {
		calls++
		if calls <= n {
			return nil, &net.OpError{Op: "listen", Net: network, Err: os.NewSyscallError("bind", err)}
		}
		return net.Listen(network, addr)
	}, &calls
}

// A port taken between Find's check and the bind is given up for the next
// draw.
func TestListenDrawsAgainWhenThePortWasTaken(t *testing.T) {
	taken, free := Port(t), Port(t)
	bind, calls := failFirst(1, syscall.EADDRINUSE)
	f := &finder{low: realLow, draw: draws(t, taken, free), bind: bind}
	l, err := f.listen("127.0.0.1")
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, free, l.Addr().(*net.TCPAddr).Port)
	require.Equal(t, 2, *calls)
}

// Any other bind error is returned at once; a port taken on every try
// makes Listen give up.
func TestListenGivesUp(t *testing.T) {
	bind, calls := failFirst(1, syscall.EACCES)
	f := &finder{low: realLow, draw: rand.IntN, bind: bind}
	_, err := f.listen("127.0.0.1")
	require.ErrorIs(t, err, syscall.EACCES)
	require.Equal(t, 1, *calls)

	bind, calls = failFirst(listenAttempts, syscall.EADDRINUSE)
	f.bind = bind
	_, err = f.listen("127.0.0.1")
	require.ErrorIs(t, err, syscall.EADDRINUSE)
	require.ErrorContains(t, err, "10 times")
	require.Equal(t, listenAttempts, *calls)
	require.False(t, errors.Is(err, syscall.EACCES))
}
