package replay

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/stretchr/testify/require"
)

func TestReplayFromGoServerBothLayouts(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, layout := range []Layout{LayoutCurrent, LayoutLegacy} {
		t.Run(string(layout), func(t *testing.T) {
			buf := filledBuffer(0, 0, 100)
			srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Layout: layout}, buf, Options{})
			require.NoError(t, err)
			defer srv.Close()
			cl := newClient(t, ClientConfig{})

			for _, tc := range []struct {
				start   uint64
				want    []uint64
				covered bool
			}{
				{0, seqRange(0, 100), true},
				{37, seqRange(37, 100), true},
				{100, nil, false}, // nothing newer (or expired): only the caller can tell
			} {
				var col collector
				res, err := cl.Replay(context.Background(), srv.Endpoint(), tc.start, col.apply)
				require.NoError(t, err)
				require.Equal(t, tc.want, col.seqs)
				for _, s := range col.seqs {
					require.Equal(t, string(payloadFor(s)), col.data[s])
				}
				require.Equal(t, len(tc.want), res.Batches)
				require.Equal(t, tc.covered, res.Covered)
				require.Equal(t, uint64(100), res.Next)
				require.Equal(t, 1, res.Attempts)
				require.Equal(t, layout, res.Layout)
			}
			require.EqualValues(t, 3, srv.Stats().Requests)
		})
	}
}

func TestReplayFreshPublisherIsCovered(t *testing.T) {
	defer leakcheck.Check(t)()
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0"}, NewBuffer(0), Options{})
	require.NoError(t, err)
	defer srv.Close()
	res, err := newClient(t, ClientConfig{}).Replay(context.Background(), srv.Endpoint(), 0, (&collector{}).apply)
	require.NoError(t, err)
	require.True(t, res.Covered)
	require.Equal(t, "complete", res.Outcome())
	require.Zero(t, res.Batches)
}

func TestReplayReportsBufferTooOld(t *testing.T) {
	defer leakcheck.Check(t)()
	// The publisher kept only its last 10 batches (20..29).
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0"}, filledBuffer(10, 0, 30), Options{})
	require.NoError(t, err)
	defer srv.Close()
	var firstSeen uint64
	var col collector
	res, err := newClient(t, ClientConfig{}).Replay(context.Background(), srv.Endpoint(), 5, func(seq uint64, p []byte) error {
		if len(col.seqs) == 0 {
			firstSeen = seq
		}
		return col.apply(seq, p)
	})
	require.NoError(t, err)
	require.False(t, res.Covered)
	require.Equal(t, "partial", res.Outcome())
	require.Equal(t, uint64(20), res.First)
	require.Equal(t, uint64(20), firstSeen, "apply sees the loss on its first call")
	require.Equal(t, seqRange(20, 30), col.seqs)
	require.Equal(t, uint64(30), res.Next)
}

func TestReplayResumesAfterInterruptedAttempt(t *testing.T) {
	defer leakcheck.Check(t)()
	// The first connection dies after 5 batches; the client reconnects and
	// asks from the next sequence.
	r := startFakeRouter(t, func(c *zmqx.Conn, start uint64, req int) {
		if req == 0 {
			for s := start; s < start+5; s++ {
				_ = sendBatch(c, s)
			}
			_ = c.Close()
			return
		}
		for s := start; s < 12; s++ {
			_ = sendBatch(c, s)
		}
		_ = sendEnd(c)
	})
	defer r.Close()
	var col collector
	start := time.Now()
	res, err := newClient(t, ClientConfig{}).Replay(context.Background(), r.Endpoint(), 2, col.apply)
	require.NoError(t, err)
	require.Equal(t, seqRange(2, 12), col.seqs)
	require.Equal(t, []uint64{2, 7}, r.Starts())
	require.Equal(t, 2, res.Attempts)
	require.True(t, res.Covered)
	require.GreaterOrEqual(t, time.Since(start), DefaultBackoff, "backoff between attempts")
}

func TestReplaySilentRouterFailsBounded(t *testing.T) {
	defer leakcheck.Check(t)()
	var r *fakeRouter
	r = startFakeRouter(t, func(*zmqx.Conn, uint64, int) { r.wait() })
	defer r.Close()
	var attemptOps []string
	var mu sync.Mutex
	cl := newClient(t, ClientConfig{IdleTimeout: 200 * time.Millisecond, Backoff: 10 * time.Millisecond,
		OnAttemptError: func(e *Error) { mu.Lock(); attemptOps = append(attemptOps, e.Op); mu.Unlock() }})
	// The configured 200 ms reaches the sockets' transport, and each attempt
	// ends on that socket deadline (not on the replay's 2 min Timeout, which
	// would end the replay with the attempt's error rather than
	// OpNoProgress), no earlier than it.
	require.Equal(t, 200*time.Millisecond, cl.opts.IdleTimeout)
	start := time.Now()
	res, err := cl.Replay(context.Background(), r.Endpoint(), 0, (&collector{}).apply)
	elapsed := time.Since(start)
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, OpNoProgress, re.Op)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the idle deadline ended each attempt")
	require.Equal(t, 3, res.Attempts)
	require.GreaterOrEqual(t, elapsed, 3*200*time.Millisecond)
	mu.Lock()
	require.Equal(t, []string{OpIncomplete, OpIncomplete, OpIncomplete}, attemptOps)
	mu.Unlock()
}

// An attempt the caller's context cuts off is marked Canceled, so the
// caller can leave it out of the publisher's error count; one the
// client's own Timeout ends is not.
func TestReplayCancelledAttemptMarkedCanceled(t *testing.T) {
	defer leakcheck.Check(t)()
	asked := make(chan struct{}, 4)
	var r *fakeRouter
	r = startFakeRouter(t, func(*zmqx.Conn, uint64, int) { asked <- struct{}{}; r.wait() })
	defer r.Close()
	reported := make(chan *Error, 4)
	cl := newClient(t, ClientConfig{IdleTimeout: time.Hour, OnAttemptError: func(e *Error) { reported <- e }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := cl.Replay(ctx, r.Endpoint(), 0, (&collector{}).apply); done <- err }()
	<-asked
	cancel()
	var re *Error
	require.ErrorAs(t, <-done, &re)
	// The publisher has the request, but the client's Send may not have
	// returned yet when the cancellation lands (the socket's writer
	// reports it then): either phase is this attempt cut short.
	require.Contains(t, []string{OpSend, OpIncomplete}, re.Op)
	require.True(t, re.Canceled)
	require.True(t, (<-reported).Canceled)

	// The client's own deadline is the publisher's failure, in whichever
	// phase it expires on a loaded machine.
	cl = newClient(t, ClientConfig{IdleTimeout: time.Hour, Timeout: 100 * time.Millisecond,
		OnAttemptError: func(e *Error) { reported <- e }})
	_, err := cl.Replay(context.Background(), r.Endpoint(), 0, (&collector{}).apply)
	require.ErrorAs(t, err, &re)
	require.NotEqual(t, OpCapacity, re.Op)
	require.False(t, re.Canceled, "the client's own deadline is the publisher's failure")
	require.False(t, (<-reported).Canceled)
}

func TestReplayPartialReplyWithoutEndFails(t *testing.T) {
	defer leakcheck.Check(t)()
	// Two batches, then silence, on every connection: the first attempt makes
	// progress, the next three do not. The idle deadline (1 s) must not
	// expire before the first attempt's batches arrive, however late the
	// router's handler runs on a loaded machine. The replay ends on
	// OpNoProgress, not on its 2 min Timeout (which would end it with the
	// attempt's own error).
	var r *fakeRouter
	r = startFakeRouter(t, func(c *zmqx.Conn, start uint64, _ int) {
		for s := start; s < 2; s++ {
			_ = sendBatch(c, s)
		}
		r.wait()
	})
	defer r.Close()
	var col collector
	cl := newClient(t, ClientConfig{IdleTimeout: time.Second, Backoff: 10 * time.Millisecond})
	res, err := cl.Replay(context.Background(), r.Endpoint(), 0, col.apply)
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, OpNoProgress, re.Op)
	require.Equal(t, uint64(2), re.Start)
	require.Equal(t, []uint64{0, 1}, col.seqs)
	require.Equal(t, 2, res.Batches)
	require.Equal(t, uint64(2), res.Next)
	require.Equal(t, 4, res.Attempts)
	require.Equal(t, []uint64{0, 2, 2, 2}, r.Starts())
}

func TestReplayConnectFailures(t *testing.T) {
	defer leakcheck.Check(t)()
	refused := testport.Addr(t) // nothing listens, nor takes the port meanwhile
	var ops atomic.Int64
	cl := newClient(t, ClientConfig{Backoff: time.Millisecond, OnAttemptError: func(e *Error) {
		if e.Op == OpConnect {
			ops.Add(1)
		}
	}})
	_, err := cl.Replay(context.Background(), refused, 0, (&collector{}).apply)
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, OpNoProgress, re.Op)
	var inner *Error
	require.ErrorAs(t, re.Err, &inner)
	require.Equal(t, OpConnect, inner.Op)
	require.EqualValues(t, 3, ops.Load())

	// A mute peer (TCP accepted, no greeting) fails on the handshake deadline.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer mute.Close()
	// The configured 100 ms, not the 1 s default, is what the client hands
	// its sockets' transport, whose own tests show that a handshake waits
	// exactly that long; here the attempt must end on that socket deadline
	// and no earlier.
	cl = newClient(t, ClientConfig{HandshakeTimeout: 100 * time.Millisecond, MaxAttemptsWithoutProgress: 1})
	require.Equal(t, 100*time.Millisecond, cl.opts.HandshakeTimeout)
	start := time.Now()
	_, err = cl.Replay(context.Background(), mute.Addr().String(), 0, (&collector{}).apply)
	elapsed := time.Since(start)
	require.ErrorAs(t, err, &re)
	require.ErrorAs(t, re.Err, &inner)
	require.Equal(t, OpConnect, inner.Op)
	require.ErrorIs(t, inner, os.ErrDeadlineExceeded, "the handshake's read deadline ended the attempt")
	require.GreaterOrEqual(t, elapsed, 90*time.Millisecond)
}

func TestReplayCapacityWaitsWithinDeadline(t *testing.T) {
	defer leakcheck.Check(t)()
	var r *fakeRouter
	r = startFakeRouter(t, func(*zmqx.Conn, uint64, int) { r.wait() })
	defer r.Close()
	lim := NewLimiter(1)
	busy := newClient(t, ClientConfig{Limiter: lim, IdleTimeout: 10 * time.Second, MaxAttemptsWithoutProgress: 1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = busy.Replay(context.Background(), r.Endpoint(), 0, (&collector{}).apply)
	}()
	require.Eventually(t, func() bool { return lim.InFlight() == 1 }, 5*time.Second, 5*time.Millisecond)

	waiting := newClient(t, ClientConfig{Limiter: lim, Timeout: 200 * time.Millisecond})
	_, err := waiting.Replay(context.Background(), r.Endpoint(), 0, (&collector{}).apply)
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, OpCapacity, re.Op)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	r.Close() // frees the busy replay
	<-done
	require.Zero(t, lim.InFlight())
}

func TestReplayLimitHoldsUnderFanOut(t *testing.T) {
	defer leakcheck.Check(t)()
	// 20 replays against 4 slow publishers share one Limiter of 8. The
	// publishers hold every request until 8 are in flight together, so the
	// fan-out reaches the limit however the replays are scheduled, and then
	// stay slow, so a replay beyond the limit would overlap them.
	var inFlight, maxInFlight atomic.Int64
	full := make(chan struct{})
	var fullOnce sync.Once
	slow := func(c *zmqx.Conn, start uint64, _ int) {
		n := inFlight.Add(1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		if n >= 8 {
			fullOnce.Do(func() { close(full) })
		}
		select {
		case <-full:
		case <-time.After(30 * time.Second): // a hang guard only: the assertion below reports it
		}
		time.Sleep(100 * time.Millisecond) // a slow publisher thread
		_ = sendBatch(c, start)
		inFlight.Add(-1) // before END: the client holds its slot until END
		_ = sendEnd(c)
	}
	var routers []*fakeRouter
	for range 4 {
		routers = append(routers, startFakeRouter(t, slow))
	}
	defer func() {
		for _, r := range routers {
			r.Close()
		}
	}()
	lim := NewLimiter(8)
	// The publishers' hold is not a silent publisher: no idle deadline ends it.
	cl := newClient(t, ClientConfig{Limiter: lim, IdleTimeout: time.Minute})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cl.Replay(context.Background(), routers[i%4].Endpoint(), uint64(i), (&collector{}).apply)
			if err == nil && res.Batches != 1 {
				err = errors.New("want one batch")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, maxInFlight.Load(), int64(8))
	require.Equal(t, int64(8), maxInFlight.Load(), "the fan-out reached the limit")
	require.Equal(t, 8, DefaultLimiter().Size())
}

func TestReplayProtocolViolationsEndAtOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	for name, tc := range map[string]struct {
		handle func(c *zmqx.Conn, start uint64)
		want   error
	}{
		"malformed": {func(c *zmqx.Conn, start uint64) {
			_ = c.WriteMsg([]byte{}, []byte("a"), []byte("b"), []byte("c"), []byte("d"))
		}, ErrMalformed},
		"short seq": {func(c *zmqx.Conn, start uint64) {
			_ = c.WriteMsg([]byte{}, []byte{1, 2}, []byte("p"))
		}, ErrMalformed},
		"older than asked": {func(c *zmqx.Conn, start uint64) {
			_ = sendBatch(c, start-1)
			_ = sendEnd(c)
		}, ErrNonContiguous},
	} {
		t.Run(name, func(t *testing.T) {
			r := startFakeRouter(t, func(c *zmqx.Conn, start uint64, _ int) { tc.handle(c, start) })
			defer r.Close()
			res, err := newClient(t, ClientConfig{}).Replay(context.Background(), r.Endpoint(), 5, (&collector{}).apply)
			var re *Error
			require.ErrorAs(t, err, &re)
			require.Equal(t, OpIncomplete, re.Op)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, 1, res.Attempts, "not retried")
		})
	}
}

func TestReplayApplyErrorStops(t *testing.T) {
	defer leakcheck.Check(t)()
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0"}, filledBuffer(0, 0, 10), Options{})
	require.NoError(t, err)
	defer srv.Close()
	boom := errors.New("index rejected the batch")
	res, err := newClient(t, ClientConfig{}).Replay(context.Background(), srv.Endpoint(), 0, func(seq uint64, _ []byte) error {
		if seq == 3 {
			return boom
		}
		return nil
	})
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, OpApply, re.Op)
	require.ErrorIs(t, err, boom)
	require.Equal(t, 3, res.Batches)
	require.Equal(t, 1, res.Attempts)
}

func TestClientConfigValidate(t *testing.T) {
	for _, c := range []ClientConfig{
		{Timeout: -1}, {IdleTimeout: -1}, {Backoff: -1}, {MaxAttemptsWithoutProgress: -1},
		{HandshakeTimeout: -1}, {MaxFrameSize: -1}, {MaxHoleRetries: -1},
	} {
		_, err := NewClient(c, Options{})
		require.Error(t, err, "%+v", c)
	}
	c, err := NewClient(ClientConfig{}, Options{})
	require.NoError(t, err)
	require.Equal(t, DefaultTimeout, c.cfg.Timeout)
	require.Equal(t, DefaultIdleTimeout, c.cfg.IdleTimeout)
	require.Equal(t, DefaultBackoff, c.cfg.Backoff)
	require.Equal(t, DefaultMaxAttemptsWithoutProgress, c.cfg.MaxAttemptsWithoutProgress)
	require.Equal(t, DefaultMaxHoleRetries, c.cfg.MaxHoleRetries)
	require.Same(t, DefaultLimiter(), c.cfg.Limiter)
}

// The server's counters are up to date as soon as the client has the reply:
// a replay that has seen END sees its request counted. The counter used to be
// incremented after the END write returned, so a fast client saw 2 of 3.
func TestServerStatsCountedBeforeReplyArrives(t *testing.T) {
	defer leakcheck.Check(t)()
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0"}, filledBuffer(0, 0, 3), Options{})
	require.NoError(t, err)
	defer srv.Close()
	cl := newClient(t, ClientConfig{})
	for i := range 300 {
		var col collector
		_, err := cl.Replay(context.Background(), srv.Endpoint(), 0, col.apply)
		require.NoError(t, err)
		st := srv.Stats()
		require.EqualValues(t, i+1, st.Requests, "request %d", i)
		require.EqualValues(t, 3*(i+1), st.Batches, "request %d", i)
	}
}
