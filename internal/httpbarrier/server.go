package httpbarrier

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
)

// Server is a started httptest.Server that answers each request with the
// handler given to New once n requests are in flight together. A request
// whose client goes away while it waits is dropped unanswered. Close it
// (httptest.Server.Close) before checking for leaked goroutines.
type Server struct {
	*httptest.Server
	reply    http.HandlerFunc
	accepted atomic.Int64

	mu      sync.Mutex // guards n, arrived and release
	n       int
	arrived int
	release chan struct{}
}

// New starts a Server that lets requests through in rounds of n and answers
// each with reply.
func New(n int, reply http.HandlerFunc) *Server {
	s := &Server{n: n, reply: reply, release: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.accepted.Add(1)
		}
	}
	s.Start()
	return s
}

// Accepted is how many TCP connections the server has accepted.
func (s *Server) Accepted() int64 { return s.accepted.Load() }

// SetRound makes later rounds n requests long; the requests of the round
// under way count toward n too. A test changes it between rounds, when a
// client's next burst is wider than the last.
func (s *Server) SetRound(n int) {
	s.mu.Lock()
	s.n = n
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ch := s.release
	if s.arrived++; s.arrived >= s.n {
		close(ch)
		s.arrived, s.release = 0, make(chan struct{})
	}
	s.mu.Unlock()
	select {
	case <-ch:
	case <-r.Context().Done():
		return
	}
	s.reply(w, r)
}
