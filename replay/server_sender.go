package replay

import (
	"sync"
	"sync/atomic"

	"github.com/kvroute/kvroute/internal/zmqx"
)

// sender writes one client connection's replies. With SendHWM it is a queue
// of that many messages drained by its own goroutine, and a message that
// finds the queue full is dropped and counted, as libzmq's ROUTER does past
// its send high-water mark (vLLM sets no ROUTER_MANDATORY, so its replay
// socket drops silently). Without, send writes at once.
type sender struct {
	s    *Server
	c    *zmqx.Conn
	q    chan [][]byte // nil: write synchronously
	done chan struct{}

	mu  sync.Mutex
	err error // the queued writer's first error
}

func (s *Server) newSender(c *zmqx.Conn) *sender {
	o := &sender{s: s, c: c}
	if s.cfg.SendHWM > 0 {
		o.q, o.done = make(chan [][]byte, s.cfg.SendHWM), make(chan struct{})
		go o.drain()
	}
	return o
}

// send writes or queues one message, counting it in n before (so that a
// client that has the message sees the count); a message that finds the
// queue full is counted in the server's dropped replies instead. It
// returns the connection's write error, if any.
//
// The connection's handler goroutine alone sends to the queue, so a queue
// found with room keeps it until the message is in: n never counts a
// message that is then dropped.
func (o *sender) send(n *atomic.Uint64, frames ...[]byte) error {
	if o.q == nil {
		n.Add(1)
		return o.c.WriteMsg(frames...)
	}
	if err := o.failed(); err != nil {
		return err
	}
	if len(o.q) == cap(o.q) {
		o.s.dropped.Add(1)
		return nil
	}
	n.Add(1)
	o.q <- frames
	return nil
}

func (o *sender) drain() {
	defer close(o.done)
	for m := range o.q {
		if o.failed() != nil {
			continue // the connection is gone: discard what is queued
		}
		if err := o.c.WriteMsg(m...); err != nil {
			o.mu.Lock()
			o.err = err
			o.mu.Unlock()
		}
	}
}

func (o *sender) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// close stops the queue's goroutine once it has written (or discarded)
// what is queued; the caller closes the connection after.
func (o *sender) close() {
	if o.q == nil {
		return
	}
	close(o.q)
	<-o.done
}
