package zmqx

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"
)

// testPub is a minimal PUB built on Listener: every connected subscriber gets
// each message passed to Send. It ignores subscriptions (a SUB does not need
// them to receive; go-zeromq does no local filtering).
type testPub struct {
	l     *Listener
	mu    sync.Mutex
	conns []*Conn
	wg    sync.WaitGroup
	ready chan struct{} // one token per accepted subscriber
}

func startTestPub(t testing.TB, o Options) *testPub {
	t.Helper()
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Pub, o, nil)
	require.NoError(t, err)
	p := &testPub{l: l, ready: make(chan struct{}, 64)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			p.wg.Add(1)
			go func() { // read (and discard) subscriptions until the conn closes
				defer p.wg.Done()
				for {
					if _, err := c.ReadMsg(); err != nil {
						return
					}
				}
			}()
			p.ready <- struct{}{}
		}
	}()
	return p
}

func (p *testPub) Addr() string { return p.l.Addr().String() }

// waitSubscriber waits until one more subscriber has connected.
func (p *testPub) waitSubscriber(t testing.TB) {
	t.Helper()
	select {
	case <-p.ready:
	case <-time.After(5 * time.Second):
		t.Fatal("no subscriber connected")
	}
}

// Send writes frames to every subscriber and returns how many took it.
func (p *testPub) Send(frames ...[]byte) int {
	p.mu.Lock()
	conns := append([]*Conn(nil), p.conns...)
	p.mu.Unlock()
	n := 0
	for _, c := range conns {
		if c.WriteMsg(frames...) == nil {
			n++
		}
	}
	return n
}

func (p *testPub) Close() {
	_ = p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// recvTimeout runs s.Recv with an upper bound so a broken test fails instead
// of hanging; the socket is closed by the caller in any case.
func recvTimeout(t testing.TB, s zmq4.Socket, d time.Duration) (zmq4.Msg, error) {
	t.Helper()
	type res struct {
		m   zmq4.Msg
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := s.Recv()
		ch <- res{m, err}
	}()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-time.After(d):
		_ = s.Close()
		r := <-ch
		if r.err == nil {
			return r.m, nil
		}
		return zmq4.Msg{}, errors.New("test: Recv did not return in time")
	}
}

// isGuardErr reports whether err is a non-timeout net.Error wrapping reason.
func isGuardErr(err, reason error) bool {
	var ne net.Error
	var ge *GuardError
	return errors.Is(err, reason) && errors.As(err, &ne) && !ne.Timeout() && errors.As(err, &ge)
}

// deadlineLog records, for every read deadline armed on a deadlineConn, how
// far ahead of the moment it was armed it lay. The guard computes a deadline
// just before arming it, so each entry is at most the timeout it applied,
// however long the arming goroutine was descheduled.
type deadlineLog struct {
	mu    sync.Mutex
	ahead []time.Duration
}

func (l *deadlineLog) read() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.ahead...)
}

// deadlineConn is a dialed connection whose read deadlines are logged.
type deadlineConn struct {
	net.Conn
	log *deadlineLog
}

func (c *deadlineConn) SetReadDeadline(d time.Time) error {
	if !d.IsZero() {
		ahead := time.Until(d)
		c.log.mu.Lock()
		c.log.ahead = append(c.log.ahead, ahead)
		c.log.mu.Unlock()
	}
	return c.Conn.SetReadDeadline(d)
}
