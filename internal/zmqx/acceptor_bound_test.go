package zmqx

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// Peers that keep their handshakes open take at most maxPreparing
// goroutines: the connection beyond them is closed at once and counted as
// a failure, and Close still ends the ones being prepared.
func TestAcceptorBoundsConnectionsBeingPrepared(t *testing.T) {
	defer leakcheck.Check(t)()
	old := maxPreparing
	maxPreparing = 3
	t.Cleanup(func() { maxPreparing = old })

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, maxPreparing+1)
	var mu sync.Mutex
	var refused []error
	counted := make(chan struct{}, maxPreparing+1) // the acceptor closes, then counts
	a := newAcceptor(context.Background(), l, nil,
		func(_ context.Context, c net.Conn) (net.Conn, error) {
			started <- struct{}{}
			_, err := c.Read(make([]byte, 1)) // a mute peer: until Close closes it
			return nil, err
		},
		func(net.Conn) {},
		func(_ net.Addr, err error) {
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, errTooManyPreparing) {
				refused = append(refused, err)
			}
			counted <- struct{}{}
		})
	defer a.Close()

	var peers []net.Conn
	defer func() {
		for _, c := range peers {
			_ = c.Close()
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, c)
		return c
	}
	for range maxPreparing {
		dial()
		<-started
	}
	extra := dial()
	closed := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, extra); closed <- err }()
	select {
	case <-started:
		t.Fatal("the connection beyond the bound is being prepared")
	case err := <-closed: // EOF: closed at once, unprepared
		if err != nil {
			t.Fatal(err)
		}
	}
	<-counted // the close the peer saw comes before the count
	mu.Lock()
	n := len(refused)
	mu.Unlock()
	if n != 1 || a.failures.Load() != 1 {
		t.Fatalf("refused %d, failures %d; want the one connection beyond the bound", n, a.failures.Load())
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}
