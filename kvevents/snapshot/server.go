package snapshot

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvroute/kvroute/internal/zmqx"
)

// Source supplies what a Server answers: the sequence the snapshot is
// consistent with and its chunks, or ok=false for "unavailable". It is
// called once per request, from the request's connection goroutine.
type Source interface {
	Snapshot() (seq int64, chunks [][]byte, ok bool)
}

// SourceFunc adapts a function to Source.
type SourceFunc func() (int64, [][]byte, bool)

// Snapshot calls f.
func (f SourceFunc) Snapshot() (int64, [][]byte, bool) { return f() }

// ServerConfig configures a Server.
type ServerConfig struct {
	// Addr is the ROUTER address to bind ("tcp://host:port"; port 0 picks one).
	Addr string
	// PublisherID is the identity every reply carries.
	PublisherID [PublisherIDSize]byte
	// MaxConns bounds concurrent client connections (default 64).
	MaxConns int
	// WriteTimeout bounds each reply write (default 30 s): a client that
	// stopped reading cannot hold its connection goroutine.
	WriteTimeout time.Duration
}

// ServerStats counts what a Server did.
type ServerStats struct {
	Served      uint64 // snapshots sent
	Unavailable uint64 // "unavailable" answers sent
	Invalid     uint64 // messages ignored because they were not a snapshot request
}

// Server answers vLLM snapshot requests on a ROUTER socket, as vLLM's
// recorder does: one reply per request, a malformed request ignored.
type Server struct {
	cfg    ServerConfig
	src    Source
	l      *zmqx.Listener
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[*zmqx.Conn]struct{}
	closed bool

	served, unavailable, invalid atomic.Uint64
}

// NewServer binds cfg.Addr and serves snapshots from src until Close.
func NewServer(cfg ServerConfig, src Source, opts Options) (*Server, error) {
	if src == nil {
		return nil, errors.New("snapshot: NewServer needs a Source")
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 64
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	l, err := zmqx.Listen(ctx, cfg.Addr, zmq4.Router, zmqx.Options{
		WriteTimeout: cfg.WriteTimeout,
		MaxFrameSize: 64 << 10, // requests are tiny
		Clock:        opts.Clk(),
	}, opts.Log())
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Server{cfg: cfg, src: src, l: l, cancel: cancel, conns: map[*zmqx.Conn]struct{}{}}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Endpoint is the bound address ("tcp://host:port").
func (s *Server) Endpoint() string { return s.l.Endpoint() }

// Stats returns the counters.
func (s *Server) Stats() ServerStats {
	return ServerStats{Served: s.served.Load(), Unavailable: s.unavailable.Load(), Invalid: s.invalid.Load()}
}

// Close stops the server and waits for its goroutines.
func (s *Server) Close() error {
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
	s.cancel()
	err := s.l.Close()
	s.wg.Wait()
	return err
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed || len(s.conns) >= s.cfg.MaxConns {
			s.mu.Unlock()
			_ = c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *Server) serve(c *zmqx.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	for {
		m, err := c.ReadMsg()
		if err != nil {
			return
		}
		if m.Command {
			continue
		}
		if !IsRequest(m.Frames) {
			s.invalid.Add(1)
			continue
		}
		seq, chunks, ok := s.src.Snapshot()
		if !ok {
			seq, chunks = SeqUnavailable, nil
			s.unavailable.Add(1)
		} else {
			s.served.Add(1)
		}
		if err := c.WriteMsg(ReplyFrames(seq, s.cfg.PublisherID, chunks)...); err != nil {
			return
		}
	}
}
