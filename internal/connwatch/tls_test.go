package connwatch

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// serveTLS serves h over TLS on a loopback listener watched by w, under
// the TLS listener, with the given header and idle timeouts, and returns
// its address and a client TLS configuration that trusts it.
func serveTLS(t *testing.T, w *Watcher, readHeader, idle time.Duration) (string, *tls.Config) {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(rw, "ok")
	}))
	ts.Config.ReadHeaderTimeout, ts.Config.IdleTimeout = readHeader, idle
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ts.Listener.Close())
	ts.Listener = w.Install(ts.Config, ln)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ln.Addr().String(), ts.Client().Transport.(*http.Transport).TLSClientConfig
}

// dialTLS opens a TLS connection to addr, its reads bounded only as a
// guard against a hang.
func dialTLS(t *testing.T, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
	return c
}

// waitClosed reads r until the server closes the connection, failing if
// the hang guard ends the read instead.
func waitClosed(t *testing.T, r io.Reader) {
	t.Helper()
	_, err := io.Copy(io.Discard, r)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the server kept the connection: %v", err)
}

// Under TLS the watched connection is the one under the TLS connection,
// where a refusal is encrypted: a connection idle past its timeout after
// an answer is neither a header timeout nor a refusal, however the TLS
// connection is closed; a header that stops half way is one header
// timeout, its close_notify alert no refusal; a malformed request and a
// plain HTTP request sent to the TLS port are refusals; a client that
// never starts its handshake is a header timeout.
func TestWatcherUnderTLS(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	w := newWatcher()
	addr, cfg := serveTLS(t, w, 100*time.Millisecond, 100*time.Millisecond)

	c := dialTLS(t, addr, cfg)
	br := bufio.NewReader(c)
	_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	waitClosed(t, br) // idle past 100 ms
	require.Zero(t, testutil.ToFloat64(w.HeaderTimeouts), "an idle connection is no header timeout")
	require.Zero(t, testutil.ToFloat64(w.Refused), "nor a refusal")

	c = dialTLS(t, addr, cfg)
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n") // the header never ends
	require.NoError(t, err)
	waitClosed(t, c)
	require.Equal(t, 1.0, testutil.ToFloat64(w.HeaderTimeouts))
	require.Zero(t, testutil.ToFloat64(w.Refused), "the close after a header timeout refuses nothing")

	c = dialTLS(t, addr, cfg)
	_, err = io.WriteString(c, "NOT HTTP\r\n\r\n")
	require.NoError(t, err)
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, 1.0, testutil.ToFloat64(w.Refused))

	plain, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer plain.Close()
	require.NoError(t, plain.SetReadDeadline(time.Now().Add(time.Minute))) // a hang guard only
	_, err = io.WriteString(plain, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err = http.ReadResponse(bufio.NewReader(plain), nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, 2.0, testutil.ToFloat64(w.Refused), "plain HTTP on the TLS port")

	silent, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer silent.Close()
	require.NoError(t, silent.SetReadDeadline(time.Now().Add(time.Minute))) // a hang guard only
	waitClosed(t, silent)                                                   // no handshake within 100 ms
	require.Equal(t, 2.0, testutil.ToFloat64(w.HeaderTimeouts))
	require.Equal(t, 2.0, testutil.ToFloat64(w.Refused))
}
