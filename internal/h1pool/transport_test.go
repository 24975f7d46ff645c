package h1pool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
)

// wait bounds the waits for an event in these tests.
const wait = 10 * time.Second

// countingServer is a real httptest server that counts the connections it
// accepts and echoes the request body.
type countingServer struct {
	*httptest.Server
	accepted atomic.Int64
}

func newCountingServer(h http.HandlerFunc) *countingServer {
	e := &countingServer{}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"echo":%q}`, b)
		}
	}
	e.Server = httptest.NewUnstartedServer(h)
	e.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.accepted.Add(1)
		}
	}
	e.Start()
	return e
}

func (e *countingServer) hostPort() string { return strings.TrimPrefix(e.URL, "http://") }

func upPost(t *testing.T, ctx context.Context, tr http.RoundTripper, hostPort, body string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+hostPort+"/v1/x", strings.NewReader(body))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Sequential requests share one connection: each response read to its end
// puts the connection back.
func TestTransportReusesTheConnection(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newCountingServer(nil)
	defer e.Close()
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()
	for i := range 5 {
		code, body, err := upPost(t, context.Background(), tr, e.hostPort(), fmt.Sprint("req ", i))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, fmt.Sprintf(`{"echo":"req %d"}`, i), body)
	}
	require.Equal(t, int64(1), e.accepted.Load())

	// A body read to its end keeps answering EOF, without touching the
	// connection it gave back (another request may be using it).
	req, err := http.NewRequest(http.MethodPost, e.URL+"/v1/x", strings.NewReader("again"))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	_, _, err = upPost(t, context.Background(), tr, e.hostPort(), "meanwhile")
	require.NoError(t, err)
	n, err := resp.Body.Read(make([]byte, 8))
	require.Zero(t, n)
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, int64(1), e.accepted.Load())
	require.Equal(t, 1, tr.IdleConns(e.hostPort()))
}

// A server that closes its idle connections (an idle timeout, a restart)
// costs the next request nothing: the closed connection is found before use
// and a new one dialed.
func TestTransportSkipsAConnectionTheServerClosed(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newCountingServer(nil)
	defer e.Close()
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()
	_, _, err := upPost(t, context.Background(), tr, e.hostPort(), "one")
	require.NoError(t, err)
	e.CloseClientConnections()
	// The server's FIN reaches the idle socket: wait for the peek to see it.
	require.Eventually(t, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		s := tr.idle[e.hostPort()]
		return len(s) == 1 && s[0].peek.peerClosed()
	}, wait, time.Millisecond)
	code, body, err := upPost(t, context.Background(), tr, e.hostPort(), "two")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, `{"echo":"two"}`, body)
	require.Equal(t, int64(2), e.accepted.Load())
}

// rawServer is a TCP server speaking HTTP/1.1 by hand, so that a test can
// make it misbehave at an exact point of the exchange.
type rawServer struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
	// serve handles connection number n (from 1); it returns to close it.
	serve func(n int64, c net.Conn, br *bufio.Reader)
}

func newRawServer(t *testing.T, serve func(n int64, c net.Conn, br *bufio.Reader)) *rawServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &rawServer{ln: ln, serve: serve}
	e.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := e.conns.Add(1)
			e.wg.Go(func() {
				defer c.Close()
				e.serve(n, c, bufio.NewReader(c))
			})
		}
	})
	return e
}

func (e *rawServer) close() { e.ln.Close(); e.wg.Wait() }

func (e *rawServer) hostPort() string { return e.ln.Addr().String() }

// answer reads one request from br and answers it with extra header lines
// and the request's body; it returns the body, or false at EOF.
func answer(c net.Conn, br *bufio.Reader, extra string) (string, bool) {
	return answerSeen(c, br, extra, nil)
}

// answerSeen is answer that calls seen with the body before it answers, so
// that what the server read is recorded before the client can see the
// response.
func answerSeen(c net.Conn, br *bufio.Reader, extra string, seen func(string)) (string, bool) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return "", false
	}
	b, _ := io.ReadAll(req.Body)
	if seen != nil {
		seen(string(b))
	}
	_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", extra, len(b), b)
	return string(b), true
}

// A reused connection that the server closes after reading the request but
// before answering (it closed the idle connection at that very moment) is
// retried once, with the whole body, on a new connection.
func TestTransportRetriesWhenAReusedConnectionClosesUnanswered(t *testing.T) {
	defer leakcheck.Check(t)()
	var bodies sync.Map
	e := newRawServer(t, func(n int64, c net.Conn, br *bufio.Reader) {
		if n == 1 {
			answerSeen(c, br, "", func(b string) { bodies.Store("first", b) })
			_, _ = http.ReadRequest(br) // the second request: read, not answered
			return
		}
		// Recorded before the answer: the client may check it as soon as the answer arrives.
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
}

// A request without a body (nil or http.NoBody, GetBody nil: the gateway's
// GET /v1/models) is retried alike: nothing has to be read again to send
// it. Before, only a request whose GetBody was set was, and a GET got the
// server's close as its error.
func TestTransportRetriesABodilessRequestWhenAReusedConnectionClosesUnanswered(t *testing.T) {
	defer leakcheck.Check(t)()
	for name, body := range map[string]io.Reader{"nil": nil, "NoBody": http.NoBody} {
		t.Run(name, func(t *testing.T) {
			var retried sync.Map
			e := newRawServer(t, func(n int64, c net.Conn, br *bufio.Reader) {
				if n == 1 {
					answer(c, br, "")
					_, _ = http.ReadRequest(br) // the second request: read, not answered
					return
				}
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				retried.Store("request", req.Method+" "+req.URL.Path) // before the answer the client waits for
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
				answer(c, br, "")
			})
			defer e.close()
			tr := New(Config{MaxIdlePerHost: 4})
			defer tr.CloseIdleConnections()
			for i := range 2 {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+e.hostPort()+"/v1/models", body)
				require.NoError(t, err)
				require.Nil(t, req.GetBody)
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err, "request %d", i+1)
				_, err = io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
			r, _ := retried.Load("request")
			require.Equal(t, "GET /v1/models", r)
			require.Equal(t, int64(2), e.conns.Load(), "the second request sent again on a new connection")
		})
	}
}

// A new connection closed before any answer is an error, not retried: the
// server may have acted on the request.
func TestTransportDoesNotRetryANewConnection(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newRawServer(t, func(_ int64, _ net.Conn, br *bufio.Reader) { _, _ = http.ReadRequest(br) })
	defer e.close()
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()
	_, _, err := upPost(t, context.Background(), tr, e.hostPort(), "x")
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, int64(1), e.conns.Load())
}

// Connection: close from the server is honoured: the connection is not
// reused.
func TestTransportHonoursConnectionClose(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newRawServer(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		for {
			if _, ok := answer(c, br, "Connection: close\r\n"); !ok {
				return
			}
		}
	})
	defer e.close()
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()
	for range 3 {
		code, _, err := upPost(t, context.Background(), tr, e.hostPort(), "x")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
	}
	require.Equal(t, int64(3), e.conns.Load())
	require.Zero(t, tr.IdleConns(e.hostPort()))
}

// Informational answers are skipped; the final answer is returned.
func TestTransportSkipsInformationalAnswers(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newRawServer(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(req.Body)
		_, _ = fmt.Fprintf(c, "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		_, _ = http.ReadRequest(br)
	})
	defer e.close()
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()
	code, body, err := upPost(t, context.Background(), tr, e.hostPort(), "hello")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code)
	require.Equal(t, "hello", body)
}

// A 101 Switching Protocols answer is an error and its connection is
// closed: before, it came back with an empty body and keep-alive, so the
// connection, which then spoke another protocol, was pooled and the next
// request to the host read that protocol's bytes as its response.
func TestTransportClosesAConnectionThatSwitchedProtocols(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newRawServer(t, func(n int64, c net.Conn, br *bufio.Reader) {
		if n == 1 {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n")
			// Now speaking "foo": answer whatever comes next in it.
			if _, err := br.ReadByte(); err != nil {
				return
			}
			_, _ = io.WriteString(c, "FOO PROTOCOL FRAME\r\n\r\n")
			return
		}
		answer(c, br, "")
	})
	defer e.close()
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()
	key := e.hostPort()

	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+key+"/ws", nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "foo")
	resp, err := tr.RoundTrip(req)
	require.ErrorIs(t, err, errSwitchingProtocols)
	require.Nil(t, resp)
	require.Zero(t, tr.IdleConns(key), "the switched connection is not pooled")
	require.Empty(t, tr.OpenConns(), "it is closed")
	require.Equal(t, int64(1), tr.Stats().Closes[CloseBroken])

	code, body, err := upPost(t, context.Background(), tr, key, "next")
	require.NoError(t, err, "the next request got the switched connection")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "next", body)
	require.Equal(t, int64(2), e.conns.Load(), "the next request dialed a connection of its own")
}

// A response header above the bound is an error, and the memory it may take
// is bounded.
func TestTransportBoundsTheResponseHeader(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newRawServer(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 64<<10)+"\r\nContent-Length: 0\r\n\r\n")
	})
	defer e.close()
	tr := New(Config{MaxIdlePerHost: 4})
	tr.cfg.MaxHeaderBytes = 16 << 10
	defer tr.CloseIdleConnections()
	_, _, err := upPost(t, context.Background(), tr, e.hostPort(), "x")
	require.ErrorIs(t, err, ErrHeaderTooLarge)
	require.Zero(t, tr.IdleConns(e.hostPort()))
}

// Cancelling the request unblocks a wait for the answer and a read of a
// streaming body at once; the connection is closed, not pooled.
func TestTransportCancel(t *testing.T) {
	defer leakcheck.Check(t)()
	release := make(chan struct{})
	e := newCountingServer(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stream") != "" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: one\n\n")
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer e.Close()
	defer close(release)
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/x", strings.NewReader("x"))
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(req)
		errc <- err
	}()
	require.Eventually(t, func() bool { return e.accepted.Load() == 1 }, wait, time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(wait):
		t.Fatal("RoundTrip did not return after the request was cancelled")
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/x?stream=1", strings.NewReader("x"))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	require.NoError(t, err)
	require.Contains(t, string(buf[:n]), "data: one")
	go cancel()
	for err == nil {
		_, err = resp.Body.Read(buf)
	}
	require.Error(t, err)
	require.NoError(t, resp.Body.Close())
	require.Zero(t, tr.IdleConns(strings.TrimPrefix(e.URL, "http://")))
}

// A body closed before its end closes the connection (the rest of the
// answer would otherwise be read as the next one's).
func TestTransportEarlyCloseDropsTheConnection(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newCountingServer(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("z", 256<<10))
	})
	defer e.Close()
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, e.URL+"/v1/x", strings.NewReader("x"))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	_, err = resp.Body.Read(make([]byte, 10))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	_, err = resp.Body.Read(make([]byte, 10))
	require.ErrorIs(t, err, http.ErrBodyReadAfterClose)
	require.Zero(t, tr.IdleConns(strings.TrimPrefix(e.URL, "http://")))
	code, _, err := upPost(t, context.Background(), tr, strings.TrimPrefix(e.URL, "http://"), "y")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, int64(2), e.accepted.Load())
}

// Servers reached over https go through the fallback (a net/http Transport).
func TestTransportHTTPSFallsBack(t *testing.T) {
	defer leakcheck.Check(t)()
	e := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "tls") }))
	defer e.Close()
	tr := New(Config{MaxIdlePerHost: 4, Fallback: e.Client().Transport})
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, e.URL+"/v1/models", nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "tls", string(b))
}

// An unreachable server is a dial error.
func TestTransportUnreachable(t *testing.T) {
	defer leakcheck.Check(t)()
	addr := testport.Addr(t) // nothing listens, nor takes the port meanwhile
	tr := New(Config{MaxIdlePerHost: 4})
	_, _, err := upPost(t, context.Background(), tr, addr, "x")
	var op *net.OpError
	require.True(t, errors.As(err, &op), "%v", err)
}

// A server that answers before reading a large body and closes the
// connection (an early 413) has its answer passed on, not a write error.
func TestTransportPassesAnEarlyAnswerOn(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newRawServer(t, func(_ int64, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\ntoo much")
		// Closing with the body unread resets the connection: the
		// transport's write of the rest fails.
	})
	defer e.close()
	tr := New(Config{MaxIdlePerHost: 4})
	defer tr.CloseIdleConnections()
	code, body, err := upPost(t, context.Background(), tr, e.hostPort(), strings.Repeat("p", 64<<20))
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.Equal(t, "too much", body)
}
