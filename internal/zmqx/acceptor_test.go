package zmqx

import (
	"context"
	"net"
	"testing"
)

// An acceptor made under a context that is already cancelled closes itself
// from context.AfterFunc's goroutine at once; that Close must not race with
// newAcceptor still setting the acceptor up.
func TestAcceptorUnderCancelledContextClosesCleanly(t *testing.T) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		a := newAcceptor(ctx, l, nil,
			func(context.Context, net.Conn) (net.Conn, error) { return nil, net.ErrClosed },
			func(net.Conn) {}, nil)
		if _, err := a.Accept(); err != net.ErrClosed {
			t.Fatalf("Accept on an acceptor whose context was cancelled: %v, want net.ErrClosed", err)
		}
		_ = a.Close()
	}
}
