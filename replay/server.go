package replay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/telemetry"
)

// Server defaults.
const (
	DefaultServerAddr   = "tcp://*:5559"
	DefaultMaxConns     = 64
	DefaultWriteTimeout = 10 * time.Second
	// DefaultServerIdleTimeout is ServerConfig.IdleTimeout's default. A
	// replay client (Client, as llm-d's subscriber) dials a connection for
	// one request and sends it at once, so a connection silent for a
	// minute is no client waiting for its turn.
	DefaultServerIdleTimeout = time.Minute
)

// ServerConfig configures a Server. The zero value serves the current layout
// on DefaultServerAddr.
type ServerConfig struct {
	// Addr is the bind address ("tcp://*:5559", "127.0.0.1:0", ...).
	Addr string `json:"addr"`
	// Layout of the replies: LayoutCurrent (default) or LayoutLegacy.
	Layout Layout `json:"layout"`
	// MaxConns bounds concurrent client connections; extra ones are closed
	// at once (default 64).
	MaxConns int `json:"maxConns"`
	// IdleTimeout closes a client connection that sends nothing for this
	// long after its handshake or its last request (default
	// DefaultServerIdleTimeout; vLLM has none); counted in
	// ServerStats.Idle. Without it, MaxConns clients that connect and stay
	// silent would shut every other client out for as long as they keep
	// their connections. Replies queued for the connection (SendHWM) are
	// still written before it is closed.
	IdleTimeout time.Duration `json:"idleTimeout"`
	// WriteTimeout closes a client that does not read its replies
	// (default 10 s).
	WriteTimeout time.Duration `json:"writeTimeout"`
	// HandshakeTimeout bounds each client's ZMTP handshake (default 1 s).
	HandshakeTimeout time.Duration `json:"handshakeTimeout"`
	// SendHWM, when positive, serves replies like vLLM's ROUTER socket with
	// that send high-water mark: each client's replies go through a queue
	// of SendHWM messages, and a reply (batch or END) that finds it full is
	// dropped and counted (ServerStats.Dropped) instead of waiting. 0 (the
	// default) writes every reply, waiting for a slow client up to
	// WriteTimeout. libzmq's default is 1,000, which vLLM keeps. At most
	// 1,048,576: each connection's queue is allocated when it connects.
	SendHWM int `json:"sendHWM"`
}

// maxSendHWM bounds ServerConfig.SendHWM: a connection's queue of SendHWM
// slots (24 bytes each) is allocated when the client connects, so a larger
// one would let every client make the server allocate gigabytes, or panic.
const maxSendHWM = 1 << 20

// Validate reports invalid settings.
func (c ServerConfig) Validate() error {
	if err := c.Layout.Validate(); err != nil {
		return err
	}
	switch {
	case c.MaxConns < 0:
		return fmt.Errorf("replay: maxConns must not be negative, got %d", c.MaxConns)
	case c.IdleTimeout < 0:
		return fmt.Errorf("replay: idleTimeout must not be negative, got %v", c.IdleTimeout)
	case c.WriteTimeout < 0:
		return fmt.Errorf("replay: writeTimeout must not be negative, got %v", c.WriteTimeout)
	case c.HandshakeTimeout < 0:
		return fmt.Errorf("replay: handshakeTimeout must not be negative, got %v", c.HandshakeTimeout)
	case c.SendHWM < 0:
		return fmt.Errorf("replay: sendHWM must not be negative, got %d", c.SendHWM)
	case c.SendHWM > maxSendHWM:
		return fmt.Errorf("replay: sendHWM %d must be at most %d: each connection's queue is allocated when it connects", c.SendHWM, maxSendHWM)
	}
	return nil
}

// ServerStats counts what a Server did.
type ServerStats struct {
	// Requests counts valid requests answered: counted as END is written,
	// or queued with SendHWM, so that a client that read END sees it. A
	// request whose END a full send queue dropped is counted in Dropped
	// only.
	Requests uint64
	Invalid  uint64 // messages that were not [delimiter, start] (ignored, like vLLM)
	// Batches counts batches sent: counted as each is written, or queued
	// with SendHWM, so that a client that has a batch sees it. A batch a
	// full send queue dropped is counted in Dropped only.
	Batches  uint64
	Rejected uint64 // connections closed because MaxConns was reached
	Dropped  uint64 // replies (batches and END) dropped by a full send queue (SendHWM)
	// Handshakes counts connections dropped because their ZMTP handshake
	// failed (not a DEALER/REQ, a bad greeting, a mute peer).
	Handshakes uint64
	// Idle counts connections closed because they sent nothing for
	// IdleTimeout.
	Idle uint64
}

// Server answers replay requests from a Buffer on a ROUTER-compatible socket:
// every client connection is served in its own goroutine, and each valid
// request gets the buffered batches from its start sequence, then END.
//
// Ownership: NewServer starts a zmqx.RouterServer, which runs the
// connection's handler (handler) in one goroutine per accepted connection;
// that goroutine alone reads its connection. Its replies go through its
// sender (server_sender.go): written by that goroutine itself, or with
// SendHWM queued to the sender's own drain goroutine, which then alone
// writes the connection and which the handler's Done waits for. Close
// stops the RouterServer, which closes every connection (ending the
// handler at its next read or reply), waits for those goroutines and
// unregisters the metrics. The counters are atomics; the other fields are
// set by NewServer and not written after.
type Server struct {
	buf *Buffer
	cfg ServerConfig
	lg  *slog.Logger
	srv *zmqx.RouterServer

	requests, invalid, batches, dropped atomic.Uint64
	conns                               zmqx.ServerCounts // rejected, handshakes, idle
}

// NewServer binds cfg.Addr and serves buf until Close. opts.Registerer
// receives the kvroute_replay_server_* metrics, opts.Logger the
// connection-level events.
func NewServer(cfg ServerConfig, buf *Buffer, opts Options) (*Server, error) {
	if buf == nil {
		return nil, errors.New("replay: NewServer needs a Buffer")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultServerAddr
	}
	if cfg.Layout == "" {
		cfg.Layout = LayoutCurrent
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultServerIdleTimeout
	}
	lg := opts.Log()
	s := &Server{buf: buf, cfg: cfg, lg: lg}
	srv, err := zmqx.ServeRouter(zmqx.RouterConfig{Addr: cfg.Addr, MaxConns: cfg.MaxConns, Name: "replay",
		Metrics: opts.Set, Counters: s.counters(), Options: zmqx.Options{
			HandshakeTimeout: cfg.HandshakeTimeout,
			IdleTimeout:      cfg.IdleTimeout,
			WriteTimeout:     cfg.WriteTimeout,
			MaxFrameSize:     64 << 10, // requests are tiny
			Clock:            opts.Clk(),
		}}, &s.conns, lg, s.handler)
	if err != nil {
		return nil, err
	}
	s.srv = srv
	return s, nil
}

// counters are the server's metrics, which ServeRouter registers for as
// long as the server serves.
func (s *Server) counters() []telemetry.Counter {
	return []telemetry.Counter{
		{Name: "kvroute_replay_server_requests_total", Help: "Replay requests answered.", Value: &s.requests},
		{Name: "kvroute_replay_server_invalid_requests_total", Help: "Replay messages ignored because they were not [delimiter, start].", Value: &s.invalid},
		{Name: "kvroute_replay_server_batches_total", Help: "Batches sent in replay replies.", Value: &s.batches},
		{Name: "kvroute_replay_server_rejected_connections_total", Help: "Replay connections closed because the connection limit was reached.", Value: &s.conns.Rejected},
		{Name: "kvroute_replay_server_dropped_replies_total", Help: "Replay replies dropped because the client's send queue was full (sendHWM).", Value: &s.dropped},
		{Name: "kvroute_replay_server_handshake_failures_total", Help: "Replay connections dropped because their ZMTP handshake failed.", Value: &s.conns.Handshakes},
		{Name: "kvroute_replay_server_idle_closed_total", Help: "Replay connections closed because they sent nothing for the idle timeout.", Value: &s.conns.Idle},
	}
}

// Addr is the bound address (useful with port 0).
func (s *Server) Addr() net.Addr { return s.srv.Addr() }

// Endpoint is the address clients dial, "tcp://host:port".
func (s *Server) Endpoint() string { return s.srv.Endpoint() }

// Stats returns the counters.
func (s *Server) Stats() ServerStats {
	return ServerStats{
		Requests:   s.requests.Load(),
		Invalid:    s.invalid.Load(),
		Batches:    s.batches.Load(),
		Rejected:   s.conns.Rejected.Load(),
		Handshakes: s.conns.Handshakes.Load(),
		Dropped:    s.dropped.Load(),
		Idle:       s.conns.Idle.Load(),
	}
}

// Close stops accepting, closes every client connection, waits for the
// server's goroutines to end and unregisters the metrics NewServer
// registered. It is idempotent.
func (s *Server) Close() error { return s.srv.Close() }

// handler answers one connection's replay requests until a reply fails.
func (s *Server) handler(c *zmqx.Conn) zmqx.ConnHandler {
	var ents []Entry
	out := s.newSender(c)
	return zmqx.ConnHandler{Done: out.close, Message: func(frames [][]byte) error {
		// vLLM accepts exactly [identity, delimiter, start] at its ROUTER,
		// that is two frames from the peer, and ignores anything else.
		if len(frames) != 2 {
			s.invalid.Add(1)
			return nil
		}
		ents = s.buf.From(parseStart(frames[1]), ents[:0])
		err := s.reply(out, ents)
		clear(ents)
		if err != nil {
			s.lg.Debug("replay reply failed", "remote", c.RemoteAddr().String(), "err", err)
		}
		return err
	}}
}

func (s *Server) reply(out *sender, ents []Entry) error {
	empty := []byte{}
	for _, e := range ents {
		seq := binary.BigEndian.AppendUint64(nil, e.Seq)
		var err error
		if s.cfg.Layout == LayoutLegacy {
			err = out.send(&s.batches, empty, seq, e.Payload)
		} else {
			err = out.send(&s.batches, empty, e.Topic, seq, e.Payload)
		}
		if err != nil {
			return err
		}
	}
	// END counts the request answered (before it is written: the client
	// may read END and look at Stats before this goroutine runs again).
	if s.cfg.Layout == LayoutLegacy {
		return out.send(&s.requests, empty, endSeq8[:], empty)
	}
	return out.send(&s.requests, empty, empty, endSeq8[:], empty)
}
