package h1pool

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A host gets one request at a time while the warmer keeps four
// connections for the gateway's peak: the LIFO stack served every request
// with its top, and the three below stayed idle until a server with a
// short keep-alive timeout (vLLM's 5 s) closed them, so the next peak
// found them closed. Once the bottom has been idle for rotateAfter, a
// request takes it instead: the kept connections are used in turn, none
// is closed nor dialed again, and with none idle that long the stack is
// LIFO again.
func TestTransportUsesKeptConnectionsBeforeAKeepAliveClosesThem(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newFirstRequestServer()
	defer e.Close()
	tr := New(Config{MaxIdlePerHost: 8, WarmAhead: true})
	defer tr.Close()
	tr.RaisePeak(4)
	key := e.hostPort()
	var top string
	for range 8 { // the first dials, the warmer dials three more, the next three take them
		top = upServedBy(t, upSend(t, tr, key))
		tr.WaitWarmers()
	}
	require.Equal(t, 4, tr.IdleConns(key))
	require.Equal(t, top, upServedBy(t, upSend(t, tr, key)), "LIFO: the connection given back last")

	ageIdle(tr, key, rotateAfter)
	seen := map[string]bool{}
	for range 4 {
		seen[upServedBy(t, upSend(t, tr, key))] = true
	}
	require.Len(t, seen, 4, "each kept connection served a request, the oldest first")
	last := upServedBy(t, upSend(t, tr, key))
	require.Equal(t, last, upServedBy(t, upSend(t, tr, key)), "none idle for rotateAfter: LIFO again")
	st := tr.Stats()
	require.Equal(t, int64(4), st.Dials, "none dialed again")
	require.Equal(t, [numCloseReasons]int64{}, st.Closes, "none closed")
}

// Without warm-ahead the stack stays LIFO however long its bottom is idle:
// the connections a host no longer needs are left to the idle timeout (or
// the server's), not kept in use.
func TestTransportLeavesTheBottomUnusedWhenNothingIsKept(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newFirstRequestServer()
	defer e.Close()
	tr := New(Config{MaxIdlePerHost: 8})
	defer tr.Close()
	key := e.hostPort()
	r1, r2 := upSend(t, tr, key), upSend(t, tr, key)
	upServedBy(t, r1)
	top := upServedBy(t, r2)
	ageIdle(tr, key, rotateAfter)
	require.Equal(t, top, upServedBy(t, upSend(t, tr, key)))
	require.Equal(t, top, upServedBy(t, upSend(t, tr, key)))
	require.Equal(t, 2, tr.IdleConns(key))
}
