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
	// The server's header and idle timeouts also bound the TLS handshake and
	// the reading of a request sent at once; on a loaded machine 100 ms may
	// not cover those, so a run whose prompt steps were cut by the timeout
	// is repeated with a fresh server and four times the timeouts.
	for d := 100 * time.Millisecond; ; d *= 4 {
		if watchTLS(t, d) {
			return
		}
		require.Less(t, d, 5*time.Second, "the handshake and a prompt request still outlast %v", d)
		t.Logf("a prompt step outlasted the %v timeouts on this machine; again with %v", d, 4*d)
	}
}

// watchTLS runs TestWatcherUnderTLS's steps against a server with timeouts
// of d, and reports false, without judging the watcher, when a step that
// should have beaten the timeout did not (a handshake or a request sent at
// once cut by it).
func watchTLS(t *testing.T, d time.Duration) bool {
	w := newWatcher()
	addr, cfg := serveTLS(t, w, d, d)
	slow := func() bool { return testutil.ToFloat64(w.HeaderTimeouts) != 0 }

	c, ok := tryDialTLS(t, addr, cfg)
	if !ok {
		return false
	}
	br := bufio.NewReader(c)
	_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	if err != nil && slow() {
		return false
	}
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	waitClosed(t, br) // idle past the timeout
	require.Zero(t, testutil.ToFloat64(w.HeaderTimeouts), "an idle connection is no header timeout")
	require.Zero(t, testutil.ToFloat64(w.Refused), "nor a refusal")

	if c, ok = tryDialTLS(t, addr, cfg); !ok {
		return false
	}
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n") // the header never ends
	require.NoError(t, err)
	waitClosed(t, c)
	require.Equal(t, 1.0, testutil.ToFloat64(w.HeaderTimeouts))
	require.Zero(t, testutil.ToFloat64(w.Refused), "the close after a header timeout refuses nothing")

	if c, ok = tryDialTLS(t, addr, cfg); !ok {
		return false
	}
	_, err = io.WriteString(c, "NOT HTTP\r\n\r\n")
	require.NoError(t, err)
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil && testutil.ToFloat64(w.HeaderTimeouts) > 1 {
		return false
	}
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
	if err != nil && testutil.ToFloat64(w.HeaderTimeouts) > 1 {
		return false
	}
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, 2.0, testutil.ToFloat64(w.Refused), "plain HTTP on the TLS port")

	silent, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer silent.Close()
	require.NoError(t, silent.SetReadDeadline(time.Now().Add(time.Minute))) // a hang guard only
	waitClosed(t, silent)                                                   // no handshake within the timeout
	require.Equal(t, 2.0, testutil.ToFloat64(w.HeaderTimeouts))
	require.Equal(t, 2.0, testutil.ToFloat64(w.Refused))
	return true
}

// tryDialTLS is dialTLS that reports false instead of failing when the
// handshake did not finish: the server's handshake deadline is its header
// timeout, which a loaded machine can outlast.
func tryDialTLS(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, bool) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Logf("handshake: %v", err)
		return nil, false
	}
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
	return c, true
}
