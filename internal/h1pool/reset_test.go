package h1pool

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A server's idle timeout can fire as the next request arrives on the
// connection (an engine's 5 s keep-alive meeting a pooled connection taken
// just then): net/http's server then closes it with the request unread in
// its socket, which the kernel answers with a reset, not the FIN of a
// server that read the request first. The client's read of the answer gets
// ECONNRESET, no byte of answer, and the request goes again on a new
// connection as after a FIN: it does not wait out its deadline. The server
// here resets the connection once the request is in, unread.
func TestTransportRetriesWhenAReusedConnectionIsResetUnanswered(t *testing.T) {
	defer leakcheck.Check(t)()
	var bodies sync.Map
	e := newRawServer(t, func(n int64, c net.Conn, br *bufio.Reader) {
		if n == 1 {
			answer(c, br, "")
			if _, err := br.Peek(1); err != nil { // the second request has arrived
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0) // the close resets the connection
			return
		}
		answerSeen(c, br, "", func(b string) { bodies.Store("retried", b) })
	})
	defer e.close()
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()
	_, _, err := upPost(t, context.Background(), tr, e.hostPort(), "first body")
	require.NoError(t, err)
	code, body, err := upPost(t, context.Background(), tr, e.hostPort(), "second body")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "second body", body)
	b, _ := bodies.Load("retried")
	require.Equal(t, "second body", b)
	require.Equal(t, int64(2), e.conns.Load())
	s := tr.Stats()
	require.Equal(t, int64(1), s.Resends)
	require.Equal(t, int64(1), s.Closes[CloseAsked], "the reset connection is counted as the server's close")
}
