package replay

import (
	"sync"

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

// send writes or queues one message; it returns the connection's write
// error, if any.
func (o *sender) send(frames ...[]byte) error {
	if o.q == nil {
		return o.c.WriteMsg(frames...)
	}
	if err := o.failed(); err != nil {
		return err
	}
	select {
	case o.q <- frames:
	default:
		o.s.dropped.Add(1)
	}
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
