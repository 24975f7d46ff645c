package zmqx

import "sync"

// Served runs a Listener's accept loop for a request/reply server
// (RouterServer, which the replay and the snapshot servers run): each
// accepted connection is handed to its own goroutine, at most limit at a
// time, and Close ends them all. It is the one copy of the accept loop,
// the connection limit and the close-and-wait sequence those servers
// share.
//
// Ownership: Serve starts the accept loop, which starts one goroutine per
// admitted connection running the caller's serve function; that goroutine
// alone reads its connection, and when serve returns it removes the
// connection and closes it. The accept loop ends when Accept fails (Close
// closes the listener) or it finds closed set. The accept loop and every
// connection's goroutine count in wg, which Close waits for. mu guards
// conns (added to by the accept loop, removed by each connection's
// goroutine as it ends) and closed (set once by Close, which closes conns
// under mu). The other fields are set by Serve and not written after.
type Served struct {
	l      *Listener
	limit  int
	serve  func(*Conn)
	reject func(*Conn)

	mu     sync.Mutex
	conns  map[*Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Serve accepts connections from l and runs serve on each in its own
// goroutine until serve returns, then closes the connection. With limit
// connections open, a new one is passed to reject (for the caller to count
// and log; it may be nil) and closed at once: one client cannot take every
// connection slot's goroutine and memory. limit must be positive.
func Serve(l *Listener, limit int, serve, reject func(*Conn)) *Served {
	s := &Served{l: l, limit: max(limit, 1), serve: serve, reject: reject, conns: make(map[*Conn]struct{})}
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// Open returns the number of connections being served: accepted, past
// their handshake, and not yet closed.
func (s *Served) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops accepting, closes every open connection (which ends its
// serve function's reads and writes), and waits for the accept loop and
// every connection's goroutine to end. It returns the listener's Close
// error and is idempotent.
func (s *Served) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	err := s.l.Close()
	s.wg.Wait()
	return err
}

func (s *Served) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			_ = c.Close()
			return
		case len(s.conns) >= s.limit:
			s.mu.Unlock()
			if s.reject != nil {
				s.reject(c)
			}
			_ = c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.run(c)
	}
}

func (s *Served) run(c *Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	s.serve(c)
}
