package snapshot

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/telemetry"
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

// DefaultServerIdleTimeout is ServerConfig.IdleTimeout's default. A
// snapshot client (Client, as vLLM's subscribers) dials a connection for
// one request and sends it at once, so a connection silent for a minute
// is no client waiting for its turn.
const DefaultServerIdleTimeout = time.Minute

// ServerConfig configures a Server. It reads from JSON by the rules of
// every kvroute configuration (see UnmarshalJSON); zero values mean the
// defaults.
type ServerConfig struct {
	// Addr is the ROUTER address to bind ("tcp://host:port"; port 0 picks one).
	Addr string `json:"addr"`
	// PublisherID is the identity every reply carries (in JSON, an array
	// of PublisherIDSize numbers from 0 to 255).
	PublisherID [PublisherIDSize]byte `json:"publisherID"`
	// MaxConns bounds concurrent client connections (default 64).
	MaxConns int `json:"maxConns"`
	// WriteTimeout bounds each reply write (default 30 s): a client that
	// stopped reading cannot hold its connection goroutine.
	WriteTimeout time.Duration `json:"writeTimeout"`
	// IdleTimeout closes a client connection that sends nothing for this
	// long after its handshake or its last request (default
	// DefaultServerIdleTimeout); counted in ServerStats.Idle. Without it,
	// MaxConns clients that connect and stay silent would shut every other
	// client out for as long as they keep their connections.
	IdleTimeout time.Duration `json:"idleTimeout"`
}

// Validate reports negative settings (zero values mean the defaults).
func (c ServerConfig) Validate() error {
	switch {
	case c.MaxConns < 0:
		return fmt.Errorf("snapshot: maxConns must not be negative, got %d", c.MaxConns)
	case c.WriteTimeout < 0:
		return fmt.Errorf("snapshot: writeTimeout must not be negative, got %v", c.WriteTimeout)
	case c.IdleTimeout < 0:
		return fmt.Errorf("snapshot: idleTimeout must not be negative, got %v", c.IdleTimeout)
	}
	return nil
}

// ServerStats counts what a Server did.
type ServerStats struct {
	Served      uint64 // snapshots sent
	Unavailable uint64 // "unavailable" answers sent
	Invalid     uint64 // messages ignored because they were not a snapshot request
	Rejected    uint64 // connections closed at once because MaxConns were open
	Handshakes  uint64 // connections dropped because their ZMTP handshake failed
	Idle        uint64 // connections closed because they sent nothing for IdleTimeout
}

// Server answers vLLM snapshot requests on a ROUTER socket, as vLLM's
// recorder does: one reply per request, a malformed request ignored.
//
// Ownership: NewServer starts a zmqx.RouterServer, which runs the
// connection's handler (handler) in one goroutine per accepted connection;
// that goroutine alone reads and writes its connection and calls the
// Source. Close stops the RouterServer, which waits for those goroutines
// and unregisters the metrics. The counters are atomics; the other fields
// are set by NewServer and not written after.
type Server struct {
	cfg        ServerConfig
	src        Source
	srv        *zmqx.RouterServer
	collectors []prometheus.Collector // srv's metrics, in counters' order

	served, unavailable, invalid atomic.Uint64
	conns                        zmqx.ServerCounts // rejected, handshakes, idle
}

// NewServer validates cfg, binds cfg.Addr and serves snapshots from src
// until Close. With a Registerer in opts, its counters are also Prometheus
// metrics (kvroute_snapshot_server_*_total), unregistered by Close.
func NewServer(cfg ServerConfig, src Source, opts Options) (*Server, error) {
	if src == nil {
		return nil, errors.New("snapshot: NewServer needs a Source")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 64
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultServerIdleTimeout
	}
	s := &Server{cfg: cfg, src: src}
	srv, err := zmqx.ServeRouter(zmqx.RouterConfig{Addr: cfg.Addr, MaxConns: cfg.MaxConns, Name: "snapshot",
		Metrics: opts.Set, Counters: s.counters(), Options: zmqx.Options{
			IdleTimeout:  cfg.IdleTimeout,
			WriteTimeout: cfg.WriteTimeout,
			MaxFrameSize: 64 << 10, // requests are tiny
			Clock:        opts.Clk(),
		}}, &s.conns, opts.Log(), s.handler)
	if err != nil {
		return nil, err
	}
	s.srv, s.collectors = srv, srv.Collectors()
	return s, nil
}

// counters are the server's metrics, which ServeRouter registers for as
// long as the server serves.
func (s *Server) counters() []telemetry.Counter {
	return []telemetry.Counter{
		{Name: "kvroute_snapshot_server_served_total", Help: "Snapshots sent.", Value: &s.served},
		{Name: "kvroute_snapshot_server_unavailable_total", Help: "Snapshot requests answered \"unavailable\".", Value: &s.unavailable},
		{Name: "kvroute_snapshot_server_invalid_requests_total", Help: "Messages ignored because they were not a snapshot request.", Value: &s.invalid},
		{Name: "kvroute_snapshot_server_rejected_connections_total", Help: "Snapshot connections closed because the connection limit was reached.", Value: &s.conns.Rejected},
		{Name: "kvroute_snapshot_server_handshake_failures_total", Help: "Snapshot connections dropped because their ZMTP handshake failed.", Value: &s.conns.Handshakes},
		{Name: "kvroute_snapshot_server_idle_closed_total", Help: "Snapshot connections closed because they sent nothing for the idle timeout.", Value: &s.conns.Idle},
	}
}

// Endpoint is the bound address ("tcp://host:port").
func (s *Server) Endpoint() string { return s.srv.Endpoint() }

// Stats returns the counters.
func (s *Server) Stats() ServerStats {
	return ServerStats{Served: s.served.Load(), Unavailable: s.unavailable.Load(), Invalid: s.invalid.Load(), Rejected: s.conns.Rejected.Load(),
		Handshakes: s.conns.Handshakes.Load(), Idle: s.conns.Idle.Load()}
}

// Close stops the server, waits for its goroutines and unregisters its
// metrics. It is idempotent.
func (s *Server) Close() error { return s.srv.Close() }

// handler answers one connection's requests: a reply per snapshot request,
// until a write fails.
func (s *Server) handler(c *zmqx.Conn) zmqx.ConnHandler {
	return zmqx.ConnHandler{Message: func(frames [][]byte) error {
		if !IsRequest(frames) {
			s.invalid.Add(1)
			return nil
		}
		seq, chunks, ok := s.src.Snapshot()
		if !ok {
			seq, chunks = SeqUnavailable, nil
			s.unavailable.Add(1)
		} else {
			s.served.Add(1)
		}
		return c.WriteMsg(ReplyFrames(seq, s.cfg.PublisherID, chunks)...)
	}}
}
