package connwatch

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// serve starts srv on a loopback listener watched by w and returns its
// address; the server is closed when the test ends.
func serve(t *testing.T, w *Watcher, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	wl := w.Install(srv, ln)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(wl)
	}()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		<-done
	})
	return ln.Addr().String()
}

func newWatcher() *Watcher {
	return &Watcher{
		HeaderTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "t"}),
		Refused:        prometheus.NewCounter(prometheus.CounterOpts{Name: "r"}),
	}
}

// A connection whose header stops half way is closed at the server's
// ReadHeaderTimeout and counted once; one whose handler answers, then
// stays idle past the same timeout (shorter than the idle timeout would
// be), is not a header timeout; a malformed request is a refusal, and a
// handler's own 400 is not.
func TestWatcherCountsHeaderTimeoutsAndRefusals(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	w := newWatcher()
	addr := serve(t, w, &http.Server{
		ReadHeaderTimeout: 200 * time.Millisecond,
		IdleTimeout:       time.Minute,
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/bad" {
				http.Error(rw, "bad", http.StatusBadRequest)
			}
		}),
	})

	// Half a header, then nothing: the server closes the connection.
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute))) // a hang guard only
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, c.Close())
	require.Equal(t, 1.0, testutil.ToFloat64(w.HeaderTimeouts))

	// A handler's 400, then a malformed request on the same connection.
	c, err = net.Dial("tcp", addr)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	_, err = io.WriteString(c, "GET /bad HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Zero(t, testutil.ToFloat64(w.Refused), "a handler's own answer is not a refusal")
	_, err = io.WriteString(c, "NOT A REQUEST\r\n\r\n")
	require.NoError(t, err)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, c.Close())
	require.Equal(t, 1.0, testutil.ToFloat64(w.Refused))
	require.Equal(t, 1.0, testutil.ToFloat64(w.HeaderTimeouts))
}

// net/http answers "OPTIONS *" itself, before any handler, with a 200: an
// answer, not a refusal, so a client that sends it is not counted as
// refused; a request net/http cannot read still is.
func TestWatcherDoesNotCountServerOptionsAsRefused(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	w := newWatcher()
	addr := serve(t, w, &http.Server{
		ReadHeaderTimeout: time.Minute,
		Handler:           http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
	})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute))) // a hang guard only
	br := bufio.NewReader(c)
	_, err = io.WriteString(c, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Zero(t, testutil.ToFloat64(w.Refused), "net/http's answer to OPTIONS * is not a refusal")

	_, err = io.WriteString(c, "GET / HTTP/9.9\r\nHost: x\r\n\r\n") // an unsupported version
	require.NoError(t, err)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusHTTPVersionNotSupported, resp.StatusCode)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, 1.0, testutil.ToFloat64(w.Refused))
}

// net/http reads the first byte of a connection's next request while it
// answers "OPTIONS *" itself, and ends that read with a deadline in the
// past once the answer is out: that is no header timeout, so requests that
// each arrive whole count none.
func TestWatcherCountsNoHeaderTimeoutForServerOptions(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	w := newWatcher()
	addr := serve(t, w, &http.Server{
		ReadHeaderTimeout: time.Minute,
		Handler:           http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
	})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute))) // a hang guard only
	br := bufio.NewReader(c)
	for _, req := range []string{"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"} {
		_, err = io.WriteString(c, req)
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
	}
	// The GET was read after the OPTIONS answer's end: its read is over.
	require.Zero(t, testutil.ToFloat64(w.HeaderTimeouts), "every header came at once")
	require.Zero(t, testutil.ToFloat64(w.Refused))
}
