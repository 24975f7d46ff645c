package zmqx

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// ServerCounts are the connection-level outcomes a request/reply server
// counts: connections refused at its limit, connections whose handshake
// failed, and connections closed because they sent nothing for the idle
// timeout. The server owns them (it lists them among RouterConfig.Counters
// and reads them for its stats); ServeRouter adds to them from its
// goroutines.
type ServerCounts struct {
	Rejected, Handshakes, Idle atomic.Uint64
}

// RouterConfig configures ServeRouter.
type RouterConfig struct {
	// Addr is the address to bind ("tcp://host:port"; port 0 picks one).
	Addr string
	// MaxConns bounds the connections served at once (see Serve).
	MaxConns int
	// Options are the connections' (timeouts, frame size, clock);
	// OnHandshakeFailure is ServeRouter's own.
	Options Options
	// Name is the server's in its log messages and errors ("snapshot",
	// "replay").
	Name string
	// Metrics registers Counters; a Set without a Registerer registers
	// nothing.
	Metrics telemetry.Set
	// Counters are the server's metrics (its request counts and the
	// ServerCounts): ServeRouter registers them all or none before it
	// binds and unregisters them when binding fails or on Close, so that a
	// closed server can be built again on the same registry.
	Counters []telemetry.Counter
}

// ConnHandler serves one connection's messages: Message gets every message
// that is not a ZMTP command, in order, from the connection's goroutine,
// until it returns an error or a read fails (the connection is then
// closed); Done, when not nil, runs once after the last message, on the
// same goroutine.
type ConnHandler struct {
	Message func(frames [][]byte) error
	Done    func()
}

// RouterServer is a request/reply server on a ROUTER socket (the snapshot
// and the replay servers): a Listener, its accept loop (Served) and the
// read loop of every connection, which counts and logs what ends a
// connection the same way for every such server.
//
// Ownership: ServeRouter starts the accept loop and one goroutine per
// connection (Served's); each connection's goroutine alone reads it and
// calls its ConnHandler. Close cancels the handshakes, closes the listener
// and every connection, and waits for those goroutines. The fields are set
// by ServeRouter and not written after (unregister runs once, in Close).
type RouterServer struct {
	cfg        RouterConfig
	counts     *ServerCounts
	lg         *slog.Logger
	serve      func(*Conn) ConnHandler
	l          *Listener
	cancel     context.CancelFunc
	conns      *Served
	collectors []prometheus.Collector // what ServeRouter registered
	unregister sync.Once
}

// ServeRouter binds cfg.Addr as a ROUTER socket and serves each connection
// accepted with the ConnHandler handler returns for it, counting the
// connections refused at cfg.MaxConns, the failed handshakes and the idle
// closes in counts, and logging them at debug through lg. It registers
// cfg.Counters first and fails, binding nothing, when they cannot all be
// registered.
func ServeRouter(cfg RouterConfig, counts *ServerCounts, lg *slog.Logger, handler func(*Conn) ConnHandler) (*RouterServer, error) {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	cs, err := cfg.Metrics.RegisterCounters(cfg.Counters...)
	if err != nil {
		return nil, fmt.Errorf("%s: registering server metrics: %w", cfg.Name, err)
	}
	s := &RouterServer{cfg: cfg, counts: counts, lg: lg, serve: handler, collectors: cs}
	ctx, cancel := context.WithCancel(context.Background())
	o := cfg.Options
	o.OnHandshakeFailure = func(net.Addr, error) { counts.Handshakes.Add(1) }
	l, err := Listen(ctx, cfg.Addr, zmq4.Router, o, lg)
	if err != nil {
		cancel()
		cfg.Metrics.Unregister(cs...)
		return nil, err
	}
	s.l, s.cancel = l, cancel
	s.conns = Serve(l, cfg.MaxConns, s.run, s.reject)
	return s, nil
}

// Addr is the bound address.
func (s *RouterServer) Addr() net.Addr { return s.l.Addr() }

// Endpoint is the address clients dial, "tcp://host:port".
func (s *RouterServer) Endpoint() string { return s.l.Endpoint() }

// Open returns the number of connections being served.
func (s *RouterServer) Open() int { return s.conns.Open() }

// Collectors are the metrics ServeRouter registered for cfg.Counters, in
// their order (nil without a Registerer).
func (s *RouterServer) Collectors() []prometheus.Collector { return s.collectors }

// Close stops accepting, closes every connection, waits for the server's
// goroutines and unregisters the server's metrics. It is idempotent.
func (s *RouterServer) Close() error {
	s.cancel()
	err := s.conns.Close()
	s.unregister.Do(func() { s.cfg.Metrics.Unregister(s.collectors...) })
	return err
}

// reject counts and logs a connection refused at MaxConns.
func (s *RouterServer) reject(c *Conn) {
	s.counts.Rejected.Add(1)
	s.lg.Debug(s.cfg.Name+" connection rejected: limit reached", "remote", c.RemoteAddr().String(), "limit", s.cfg.MaxConns)
}

// run reads one connection's messages into its handler until a read or
// the handler fails.
func (s *RouterServer) run(c *Conn) {
	h := s.serve(c)
	if h.Done != nil {
		defer h.Done()
	}
	for {
		m, err := c.ReadMsg()
		if err != nil {
			if IsIdle(err) {
				s.counts.Idle.Add(1)
				s.lg.Debug(s.cfg.Name+" connection closed: idle", "remote", c.RemoteAddr().String(), "idleTimeout", s.cfg.Options.IdleTimeout)
			}
			return
		}
		if m.Command {
			continue
		}
		if h.Message(m.Frames) != nil {
			return
		}
	}
}
