package h1pool

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// heldServer holds every request until the test releases it, and counts the
// connections it accepts.
type heldServer struct {
	*httptest.Server
	accepted atomic.Int64
	arrived  chan struct{}
	release  chan struct{}
}

func newHeldServer() *heldServer {
	s := &heldServer{arrived: make(chan struct{}, 16), release: make(chan struct{}, 16)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.arrived <- struct{}{}
		select {
		case <-s.release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.accepted.Add(1)
		}
	}
	s.Start()
	return s
}

// send runs one request through tr in the background and reports its
// error once its answer is read.
func send(ctx context.Context, tr *Transport, url string) <-chan error {
	errc := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("x"))
		if err == nil {
			var resp *http.Response
			if resp, err = tr.RoundTrip(req); err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		}
		errc <- err
	}()
	return errc
}

// waiting returns how many requests wait at hostPort's cap.
func (t *Transport) waitingFor(hostPort string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.waiting[hostPort])
}

// At MaxConnsPerHost a request waits for a connection given back instead of
// dialing one more; a waiter whose context ends leaves the queue; a
// connection closed (here by a cancelled request) hands its place to the
// next waiter, which dials.
func TestTransportCapsConnectionsPerHost(t *testing.T) {
	defer leakcheck.Check(t)()
	s := newHeldServer()
	defer s.Close()
	tr := New(Config{MaxConnsPerHost: 2})
	defer tr.Close()
	key := s.Listener.Addr().String()

	first := send(context.Background(), tr, s.URL)
	cctx, cancelSecond := context.WithCancel(context.Background())
	second := send(cctx, tr, s.URL)
	<-s.arrived
	<-s.arrived // two connections, both in use
	gone, cancelGone := context.WithCancel(context.Background())
	goneErr := send(gone, tr, s.URL)
	third := send(context.Background(), tr, s.URL)
	require.Eventually(t, func() bool { return tr.waitingFor(key) == 2 }, wait, time.Millisecond)
	cancelGone()
	require.ErrorIs(t, <-goneErr, context.Canceled)
	require.Equal(t, 1, tr.waitingFor(key), "the cancelled waiter left the queue")

	s.release <- struct{}{} // one of the two answers: its connection goes to the third request
	<-s.arrived
	require.Equal(t, int64(2), s.accepted.Load(), "the third request reused a connection given back")

	cancelSecond() // whichever of first and second is still held: cancelled or answered
	fourth := send(context.Background(), tr, s.URL)
	s.release <- struct{}{}
	s.release <- struct{}{}
	s.release <- struct{}{}
	var errs []error
	for _, c := range []<-chan error{first, second, third, fourth} {
		errs = append(errs, <-c)
	}
	require.NoError(t, errs[0])
	require.NoError(t, errs[2])
	require.NoError(t, errs[3])
	st := tr.Stats()
	require.Equal(t, st.Dials, s.accepted.Load())
	if errs[1] != nil {
		require.ErrorIs(t, errs[1], context.Canceled)
		require.Equal(t, int64(1), st.Closes[CloseCanceled], "the cancelled request closed its connection")
	}
	require.LessOrEqual(t, st.Dials-st.Closes[CloseCanceled], int64(2), "never more than 2 connections open")
	require.LessOrEqual(t, len(tr.OpenConns()), 1)
}

// Close closes the idle connections, and a connection given back after it
// (its request was in flight) is closed rather than kept.
func TestTransportCloseClosesConnectionsGivenBackLater(t *testing.T) {
	defer leakcheck.Check(t)()
	s := newHeldServer()
	defer s.Close()
	tr := New(Config{})
	errc := send(context.Background(), tr, s.URL)
	<-s.arrived
	tr.Close()
	s.release <- struct{}{}
	require.NoError(t, <-errc)
	require.Zero(t, tr.IdleConns(s.Listener.Addr().String()))
	require.Equal(t, int64(1), tr.Stats().Closes[CloseIdle])
	require.Empty(t, tr.OpenConns())
}
