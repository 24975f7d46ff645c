package h1pool

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// conn is one keep-alive connection to a server.
type conn struct {
	key       string
	c         net.Conn
	lim       limitedConn
	out       countingWriter // what bw wrote to c: whether a request's bytes left
	br        *bufio.Reader
	bw        *bufio.Writer
	peek      *peeker
	reused    bool
	idleSince time.Time
	dropped   atomic.Bool // closed and no longer counted in open
}

// limitedConn reads from a connection, at most n bytes while n >= 0 (the
// response header's bound).
type limitedConn struct {
	c net.Conn
	n int64
}

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.c.Read(p)
	}
	if l.n == 0 {
		return 0, ErrHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.c.Read(p)
	l.n -= int64(n)
	return n, err
}

// countingWriter writes to a connection and counts the bytes written (the
// request's goroutine only).
type countingWriter struct {
	c net.Conn
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.c.Write(p)
	w.n += int64(n)
	return n, err
}

// dial opens a connection to key; the caller has counted it in open.
func (t *Transport) dial(ctx context.Context, key string) (*conn, error) {
	c, err := t.dialer.DialContext(ctx, "tcp", key)
	if err != nil {
		return nil, err
	}
	t.dials.Add(1)
	if f := t.cfg.OnDial; f != nil {
		f()
	}
	pc := &conn{key: key, c: c, peek: newPeeker(c)}
	pc.lim = limitedConn{c: c, n: -1}
	pc.br = bufio.NewReaderSize(&pc.lim, t.cfg.ReadBufferSize)
	pc.out = countingWriter{c: c}
	pc.bw = bufio.NewWriterSize(&pc.out, t.cfg.WriteBufferSize)
	return pc, nil
}

// body is a response body: reading it to the end puts its connection back
// in the pool; closing it earlier, a read error or a cancelled request
// closes the connection.
type body struct {
	rc     io.ReadCloser
	t      *Transport
	pc     *conn
	stop   func() bool // stops the context's deadline poke; false if it ran
	keep   bool        // the connection may be reused once the body is read
	done   atomic.Bool // the connection is released
	closed atomic.Bool
	err    error // the first read error, returned again by later reads (Read's goroutine only)
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.err != nil {
		// The connection may already serve another request: never read
		// it again.
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if err != nil {
		b.err = err
		b.finish(err == io.EOF)
	}
	return n, err
}

func (b *body) Close() error {
	b.closed.Store(true)
	b.finish(b.rc == http.NoBody)
	return nil
}

// finish releases the connection once: to the pool when complete is true and
// the connection is reusable, else closed.
func (b *body) finish(complete bool) {
	if b.done.Swap(true) {
		return
	}
	ran := !b.stop()
	b.t.busy.Add(-1)
	switch {
	case ran:
		b.t.drop(b.pc, CloseCanceled)
	case !complete || b.pc.br.Buffered() != 0:
		b.t.drop(b.pc, CloseBroken)
	case !b.keep:
		b.t.drop(b.pc, CloseAsked)
	default:
		b.t.put(b.pc, false)
	}
}
