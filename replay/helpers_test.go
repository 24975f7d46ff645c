package replay

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/stretchr/testify/require"
)

// fakeRouter is a scriptable replay socket: for every request it calls
// handle with the connection, the requested start and the request's index
// (0 for the first request the router saw). Close ends every handler.
type fakeRouter struct {
	l      *zmqx.Listener
	handle func(c *zmqx.Conn, start uint64, req int)
	reqs   atomic.Int64
	mu     sync.Mutex
	conns  []*zmqx.Conn
	starts []uint64
	wg     sync.WaitGroup
	done   chan struct{}
	once   sync.Once
}

func startFakeRouter(t testing.TB, handle func(c *zmqx.Conn, start uint64, req int)) *fakeRouter {
	t.Helper()
	l, err := zmqx.Listen(context.Background(), "127.0.0.1:0", zmq4.Router, zmqx.Options{}, nil)
	require.NoError(t, err)
	r := &fakeRouter{l: l, handle: handle, done: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns = append(r.conns, c)
			r.mu.Unlock()
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				defer c.Close()
				for {
					m, err := c.ReadMsg()
					if err != nil {
						return
					}
					if m.Command || len(m.Frames) != 2 {
						continue
					}
					start := parseStart(m.Frames[1])
					r.mu.Lock()
					r.starts = append(r.starts, start)
					r.mu.Unlock()
					r.handle(c, start, int(r.reqs.Add(1)-1))
				}
			}()
		}
	}()
	return r
}

func (r *fakeRouter) Endpoint() string { return r.l.Endpoint() }

// Starts returns the start sequences requested so far.
func (r *fakeRouter) Starts() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.starts...)
}

func (r *fakeRouter) Close() {
	r.once.Do(r.close)
}

func (r *fakeRouter) close() {
	close(r.done)
	_ = r.l.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// wait blocks a handler until the router closes (a silent ROUTER).
func (r *fakeRouter) wait() { <-r.done }

func seq8(s uint64) []byte { return binary.BigEndian.AppendUint64(nil, s) }

func payloadFor(s uint64) []byte { return fmt.Appendf(nil, "batch-%d", s) }

// sendBatch writes one batch in the current layout.
func sendBatch(c *zmqx.Conn, s uint64) error {
	return c.WriteMsg([]byte{}, []byte("kv@10.0.0.1:8000@m"), seq8(s), payloadFor(s))
}

func sendEnd(c *zmqx.Conn) error {
	return c.WriteMsg([]byte{}, []byte{}, seq8(EndSeq), []byte{})
}

// collector records applied batches.
type collector struct {
	mu   sync.Mutex
	seqs []uint64
	data map[uint64]string
}

func (c *collector) apply(seq uint64, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.data == nil {
		c.data = map[uint64]string{}
	}
	c.seqs = append(c.seqs, seq)
	c.data[seq] = string(payload)
	return nil
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func newClient(t testing.TB, cfg ClientConfig) *Client {
	t.Helper()
	if cfg.Limiter == nil {
		cfg.Limiter = NewLimiter(0)
	}
	c, err := NewClient(cfg, Options{})
	require.NoError(t, err)
	return c
}

func filledBuffer(capacity int, from, to uint64) *Buffer {
	b := NewBuffer(capacity)
	for s := from; s < to; s++ {
		b.Add(s, []byte("kv@10.0.0.1:8000@m"), payloadFor(s))
	}
	return b
}
