package h1pool

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// lateWriteServer reads each request whole, answers it and signals
// answered once the handler has written its answer; it counts the
// connections it accepts.
type lateWriteServer struct {
	*httptest.Server
	accepted atomic.Int64
	answered chan struct{}
}

func newLateWriteServer() *lateWriteServer {
	s := &lateWriteServer{answered: make(chan struct{}, 8)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strings.Repeat("a", int(n%100)+1))
		w.(http.Flusher).Flush()
		s.answered <- struct{}{}
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.accepted.Add(1)
		}
	}
	s.Start()
	return s
}

// lateWriteRequest is a request whose httptrace WroteRequest waits for
// hold (or, as a bound should the write never complete, wait): the report
// of the write comes late. Its 64 KiB body reaches the socket before the
// report either way (net/http's writer flushes its 4 KiB buffer as it fills
// and hands the rest to the connection directly).
func lateWriteRequest(t *testing.T, url string, hold <-chan struct{}, reported *atomic.Bool) *http.Request {
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			require.NoError(t, i.Err)
			select {
			case <-hold:
			case <-time.After(wait):
			}
			reported.Store(true)
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(strings.Repeat("p", 64<<10)))
	require.NoError(t, err)
	return req
}

// getThrough sends a plain request through tr and reads its answer.
func getThrough(t *testing.T, tr http.RoundTripper, url string) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
}

// The mechanism this package removes, made observable on net/http's
// Transport without a sleep: its writer goroutine reports a request written
// (and only then may the connection be reused) after the answer has been
// read whole. net/http's reader goroutine waits 50 ms for that report
// (maxWriteWaitBeforeConnReuse) and then closes the connection, so the next
// request dials a new one. The writer is held here by its WroteRequest
// hook until the caller has read the answer's end, which on net/http
// returns only once the reader has decided; on a CPU-starved machine the
// same happens when the writer goroutine is not scheduled within 50 ms.
func TestNetHTTPRetiresAConnectionWhoseWriteIsReportedLate(t *testing.T) {
	defer leakcheck.Check(t)()
	s := newLateWriteServer()
	defer s.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()

	hold := make(chan struct{})
	var reported atomic.Bool
	resp, err := tr.RoundTrip(lateWriteRequest(t, s.URL, hold, &reported))
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.False(t, reported.Load(), "the answer was read whole before the write was reported")
	close(hold)

	getThrough(t, tr, s.URL)
	require.Equal(t, int64(2), s.accepted.Load(), "net/http closed the connection whose write was reported late, and dialed again")
}

// The same request through a Transport: the write is reported on the
// caller's goroutine before RoundTrip returns (the hook is not held: it
// runs on the goroutine that then reads the answer), and the connection is
// back in the pool when the answer's last Read returns, however late the
// caller gets to read it (here, only once the server has sent its whole
// answer, the order net/http punishes): no timer and no other goroutine
// decide. The next request reuses it.
func TestTransportKeepsAConnectionWhoseWriteIsReportedLate(t *testing.T) {
	defer leakcheck.Check(t)()
	s := newLateWriteServer()
	defer s.Close()
	tr := New(Config{})
	defer tr.Close()

	var reported atomic.Bool
	open := make(chan struct{})
	close(open)
	resp, err := tr.RoundTrip(lateWriteRequest(t, s.URL, open, &reported))
	require.NoError(t, err)
	require.True(t, reported.Load(), "the write is reported before RoundTrip returns")
	<-s.answered // the caller reads the answer only once it has been sent whole
	require.Zero(t, tr.IdleConns(s.Listener.Addr().String()), "the connection is in use until the answer's end")
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, 1, tr.IdleConns(s.Listener.Addr().String()), "the answer's last Read gave the connection back")
	require.NoError(t, resp.Body.Close())

	getThrough(t, tr, s.URL)
	require.Equal(t, int64(1), s.accepted.Load(), "one connection for both requests")
	st := tr.Stats()
	require.Equal(t, int64(1), st.Dials)
	require.Equal(t, [numCloseReasons]int64{}, st.Closes, "no connection closed")
}
