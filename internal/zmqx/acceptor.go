package zmqx

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/telemetry"
)

// acceptRetryPause is how long the accept loop waits after a failed Accept
// (e.g. out of file descriptors) before it tries again.
const acceptRetryPause = 50 * time.Millisecond

// maxPreparing bounds the connections an acceptor prepares at once, each on
// a goroutine of its own, from the accept until Accept hands it out: the
// handshake deadline bounds how long each peer holds its preparation, not
// how many peers hold one at once or the prepared connections waiting for
// Accept. A connection beyond it is closed at once and counted as a
// failed preparation (errTooManyPreparing). Tests lower it.
var maxPreparing = 1024

// errTooManyPreparing is the failure of a connection refused because
// maxPreparing others were being prepared.
var errTooManyPreparing = errors.New("zmqx: too many connections in handshake")

// acceptor accepts TCP connections and prepares each one (first byte, or a
// whole ZMTP handshake) in its own goroutine, so that a slow or mute peer never
// delays the others; at most maxPreparing at once, so that peers holding
// handshakes open cannot make it start goroutines without bound. Prepared values are handed out by Accept in the order
// they become ready. Close stops the accept loop, closes connections still
// being prepared and waits for every goroutine it started.
type acceptor[T any] struct {
	ctx     context.Context
	l       net.Listener
	prep    func(context.Context, net.Conn) (T, error)
	discard func(T)
	onFail  func(net.Addr, error)
	clock   telemetry.Clock // of the pause after a failed Accept

	ready chan T
	done  chan struct{}

	mu        sync.Mutex
	stop      func() bool // context.AfterFunc's stop; nil until newAcceptor has set it
	closed    bool
	pending   map[net.Conn]struct{}
	preparing int // prepare goroutines running, at most maxPreparing
	wg        sync.WaitGroup
	once      sync.Once

	failures atomic.Uint64
}

func newAcceptor[T any](ctx context.Context, l net.Listener, clock telemetry.Clock, prep func(context.Context, net.Conn) (T, error), discard func(T), onFail func(net.Addr, error)) *acceptor[T] {
	if clock == nil {
		clock = telemetry.Wall
	}
	a := &acceptor[T]{
		clock:   clock,
		onFail:  onFail, // set before the loop starts: handshakes read it
		ctx:     ctx,
		l:       l,
		prep:    prep,
		discard: discard,
		ready:   make(chan T),
		done:    make(chan struct{}),
		pending: make(map[net.Conn]struct{}),
	}
	a.wg.Add(1)
	go a.loop()
	// go-zeromq's accept loop only notices a cancelled socket between Accepts.
	// When ctx is already done the callback runs at once on its own
	// goroutine, possibly before stop is stored: Close reads stop under mu.
	stop := context.AfterFunc(ctx, func() { _ = a.Close() })
	a.mu.Lock()
	a.stop = stop
	a.mu.Unlock()
	return a
}

func (a *acceptor[T]) loop() {
	defer a.wg.Done()
	for {
		c, err := a.l.Accept()
		if err != nil {
			if a.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (e.g. out of file descriptors): pause, then retry.
			t := a.clock.NewTimer(acceptRetryPause)
			select {
			case <-a.done:
				t.Stop()
				return
			case <-t.C():
			}
			continue
		}
		a.mu.Lock()
		if a.closed {
			a.mu.Unlock()
			_ = c.Close()
			return
		}
		if a.preparing >= maxPreparing {
			a.mu.Unlock()
			a.fail(c, errTooManyPreparing)
			continue
		}
		a.pending[c] = struct{}{}
		a.preparing++
		a.wg.Add(1)
		a.mu.Unlock()
		go a.prepare(c)
	}
}

func (a *acceptor[T]) prepare(c net.Conn) {
	defer a.wg.Done()
	defer func() {
		a.mu.Lock()
		a.preparing--
		a.mu.Unlock()
	}()
	v, err := a.prep(a.ctx, c)
	a.mu.Lock()
	delete(a.pending, c)
	closed := a.closed
	a.mu.Unlock()
	switch {
	case err != nil && closed:
		// Close aborted the preparation: no failure of the peer's, so
		// neither counted nor reported (a shutdown with connections
		// half-open would otherwise show as failed handshakes).
		_ = c.Close()
		return
	case err != nil:
		a.fail(c, err)
		return
	}
	select {
	case a.ready <- v:
	case <-a.done:
		a.discard(v)
	}
}

// fail closes c, which was not prepared, and counts and reports why.
func (a *acceptor[T]) fail(c net.Conn, err error) {
	_ = c.Close()
	a.failures.Add(1)
	if a.onFail != nil {
		a.onFail(c.RemoteAddr(), err)
	}
}

func (a *acceptor[T]) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// Accept returns the next prepared connection, or net.ErrClosed after Close.
func (a *acceptor[T]) Accept() (T, error) {
	select {
	case v := <-a.ready:
		return v, nil
	case <-a.done:
		var zero T
		return zero, net.ErrClosed
	}
}

// Addr is the listening address.
func (a *acceptor[T]) Addr() net.Addr { return a.l.Addr() }

// Close stops accepting, aborts preparations in progress and waits for them.
func (a *acceptor[T]) Close() error {
	var err error
	a.once.Do(func() {
		a.mu.Lock()
		if a.stop != nil {
			a.stop()
		}
		a.closed = true
		close(a.done)
		for c := range a.pending {
			_ = c.Close()
		}
		a.mu.Unlock()
		err = a.l.Close()
		a.wg.Wait()
	})
	return err
}
