package snapshot

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

var testID = [PublisherIDSize]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

func newServer(t *testing.T, src Source) *Server {
	t.Helper()
	s, err := NewServer(ServerConfig{Addr: "tcp://127.0.0.1:0", PublisherID: testID}, src, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newClient(t *testing.T, cfg ClientConfig) (*Client, *[]string) {
	t.Helper()
	var ops []string
	cfg.OnAttemptError = func(e *Error) { ops = append(ops, e.Op) }
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	c, err := NewClient(cfg, Options{})
	require.NoError(t, err)
	return c, &ops
}

// A snapshot crosses real ZeroMQ sockets on loopback with its sequence,
// publisher identity and chunks intact.
func TestFetchOverLoopback(t *testing.T) {
	defer leakcheck.Check(t)()
	chunks := [][]byte{[]byte("\x93\xcb\x00\x00\x00\x00\x00\x00\x00\x00\x90\x00"), []byte("second")}
	s := newServer(t, SourceFunc(func() (int64, [][]byte, bool) { return 41, chunks, true }))
	c, ops := newClient(t, ClientConfig{})
	r, err := c.Fetch(context.Background(), s.Endpoint())
	require.NoError(t, err)
	require.Equal(t, int64(41), r.Seq)
	require.Equal(t, testID, r.PublisherID)
	require.Equal(t, chunks, r.Chunks)
	require.Equal(t, int64(len(chunks[0])+len(chunks[1])), r.Bytes)
	require.Empty(t, *ops)
	require.NoError(t, s.Close())
}

// "Unavailable, retry later" is retried after the backoff until the engine
// serves; each such answer is reported as OpUnavailable.
func TestFetchRetriesWhileUnavailable(t *testing.T) {
	defer leakcheck.Check(t)()
	var n atomic.Int32
	s := newServer(t, SourceFunc(func() (int64, [][]byte, bool) {
		if n.Add(1) <= 3 {
			return 0, nil, false
		}
		return SeqEmpty, nil, true
	}))
	c, ops := newClient(t, ClientConfig{})
	r, err := c.Fetch(context.Background(), s.Endpoint())
	require.NoError(t, err)
	require.Equal(t, SeqEmpty, r.Seq)
	require.Empty(t, r.Chunks)
	require.Equal(t, []string{OpUnavailable, OpUnavailable, OpUnavailable}, *ops)
	require.Equal(t, uint64(3), s.Stats().Unavailable)
	require.NoError(t, s.Close())
}

// The overall deadline ends a load whose engine never becomes available.
func TestFetchGivesUpAtTheOverallDeadline(t *testing.T) {
	defer leakcheck.Check(t)()
	s := newServer(t, SourceFunc(func() (int64, [][]byte, bool) { return 0, nil, false }))
	c, ops := newClient(t, ClientConfig{Timeout: time.Second, Backoff: 20 * time.Millisecond})
	_, err := c.Fetch(context.Background(), s.Endpoint())
	var e *Error
	require.ErrorAs(t, err, &e)
	require.NoError(t, s.Close())
	// The deadline may fall in any attempt's step (on a loaded machine even
	// the first dial's), so the last error's step is not fixed; every
	// answer the server gave was "unavailable", and was retried.
	if s.Stats().Unavailable > 0 {
		require.Contains(t, *ops, OpUnavailable)
	}
}

// A reply above MaxBytes fails the attempt in the transport (nothing that
// large is allocated), and is counted as a receive failure.
func TestFetchRefusesAReplyAboveTheByteCap(t *testing.T) {
	defer leakcheck.Check(t)()
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = 0xc0
	}
	s := newServer(t, SourceFunc(func() (int64, [][]byte, bool) { return 7, [][]byte{big, big}, true }))
	// The first failed attempt ends the load: with timeouts no loaded
	// machine reaches, it can only fail on the reply's size.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ops []string
	c, err := NewClient(ClientConfig{MaxBytes: 100 << 10, Backoff: time.Millisecond, Timeout: time.Minute, AttemptTimeout: 30 * time.Second,
		OnAttemptError: func(e *Error) { ops = append(ops, e.Op); cancel() }}, Options{})
	require.NoError(t, err)
	_, err = c.Fetch(ctx, s.Endpoint())
	require.Error(t, err)
	require.Equal(t, []string{OpReceive}, ops)
	require.NoError(t, s.Close())
}

// Cancelling the caller's context ends a load at once.
func TestFetchStopsOnCancel(t *testing.T) {
	defer leakcheck.Check(t)()
	s := newServer(t, SourceFunc(func() (int64, [][]byte, bool) { return 0, nil, false }))
	c, _ := newClient(t, ClientConfig{Backoff: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := c.Fetch(ctx, s.Endpoint()); done <- err }()
	for s.Stats().Unavailable == 0 {
		time.Sleep(time.Millisecond) // poll for the first answer
	}
	cancel()
	require.Error(t, <-done)
	require.NoError(t, s.Close())
}

// An attempt the caller's context cuts off is marked Canceled, so the
// caller can leave it out of the engine's error count; one the client's
// own Timeout ends is not.
func TestFetchCancelledAttemptMarkedCanceled(t *testing.T) {
	defer leakcheck.Check(t)()
	asked := make(chan struct{}, 4)
	release := make(chan struct{})
	s := newServer(t, SourceFunc(func() (int64, [][]byte, bool) {
		asked <- struct{}{}
		<-release // no reply until the test ends
		return 0, nil, false
	}))
	defer func() { close(release); require.NoError(t, s.Close()) }()
	reported := make(chan *Error, 4)
	c, err := NewClient(ClientConfig{AttemptTimeout: time.Hour, Timeout: time.Hour, OnAttemptError: func(e *Error) { reported <- e }}, Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := c.Fetch(ctx, s.Endpoint()); done <- err }()
	<-asked
	cancel()
	var fe *Error
	require.ErrorAs(t, <-done, &fe)
	// The engine has the request, but the client's Send may not have
	// returned yet when the cancellation lands (the socket's writer
	// reports it then): either phase is this attempt cut short.
	require.Contains(t, []string{OpSend, OpReceive}, fe.Op)
	require.True(t, fe.Canceled)
	require.True(t, (<-reported).Canceled)

	// The client's own deadline is the engine's failure, in whichever phase
	// it expires on a loaded machine.
	c, err = NewClient(ClientConfig{AttemptTimeout: time.Hour, Timeout: 100 * time.Millisecond,
		OnAttemptError: func(e *Error) { reported <- e }}, Options{})
	require.NoError(t, err)
	_, err = c.Fetch(context.Background(), s.Endpoint())
	require.ErrorAs(t, err, &fe)
	require.NotEqual(t, OpCapacity, fe.Op)
	require.False(t, fe.Canceled, "the client's own deadline is the engine's failure")
	require.False(t, (<-reported).Canceled)
}

// The limiter admits at most its size of attempts at once.
func TestLimiterBoundsConcurrentAttempts(t *testing.T) {
	defer leakcheck.Check(t)()
	l := NewLimiter(1)
	require.NoError(t, l.acquire(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.True(t, errors.Is(l.acquire(ctx), context.DeadlineExceeded))
	require.Equal(t, 1, l.InFlight())
	l.release()
	require.NoError(t, l.acquire(context.Background()))
	l.release()
}
