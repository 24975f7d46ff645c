package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/connwatch"
	"github.com/kvroute/kvroute/telemetry"
)

// snapshotPath is where the internal listener serves the index snapshot.
const snapshotPath = "/kvroute/snapshot"

// snapshotServer serves the router's index snapshot on an internal address
// (--snapshot-listen), apart from the public listener: the snapshot tells
// which prefixes every engine caches, and peers are the only clients.
//
// A listener that fails on its own (not by shutdown) is a failure of the
// gateway, as its public listener's is: the failure is logged, stopped is
// closed, and Run shuts the gateway down and returns it, so the process
// exits rather than go on with peers unable to bootstrap from it.
//
// Ownership: serveSnapshot starts one goroutine, which only runs srv.Serve
// (logging its failure and setting err) and closes done when Serve
// returns; shutdown ends it (srv.Shutdown, then srv.Close should that fail,
// as when ctx ends first) and waits for done. srv serves each connection
// on a goroutine of its own, which touches no field here. addr, ln, srv
// and done are set by serveSnapshot and not written after; err is written
// before done is closed and read after.
type snapshotServer struct {
	addr string
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
	err  error // Serve's failure other than a shutdown
}

// snapshotHandler is the handler serveSnapshot mounts; tests wrap it to
// hold a transfer in flight.
var snapshotHandler = (*kvroute.Router).SnapshotHandler

// serveSnapshot starts the internal snapshot listener; nil when addr is
// empty or the gateway has no router (round-robin policy). It applies the
// public listener's connection timeouts: a connection whose request header
// has not arrived within readHeader (gateway.readHeaderTimeout), or which
// stays idle for idle (gateway.idleTimeout), is closed, so that peers'
// connections, or a client that opens one and sends nothing, cannot pile
// up. As on the public listener, such a close and a request net/http
// refuses unread are counted (newSnapshotWatcher), in reg: the gateway's
// /metrics.
func serveSnapshot(addr string, r *kvroute.Router, readHeader, idle time.Duration, reg prometheus.Registerer, log *slog.Logger) (*snapshotServer, error) {
	if addr == "" || r == nil {
		return nil, nil
	}
	watch, set := newSnapshotWatcher(), telemetry.Set{Registerer: reg}
	if err := set.Register(watch.HeaderTimeouts, watch.Refused); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		set.Unregister(watch.HeaderTimeouts, watch.Refused)
		return nil, fmt.Errorf("--snapshot-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(snapshotPath, snapshotHandler(r))
	s := &snapshotServer{addr: ln.Addr().String(), ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: readHeader, IdleTimeout: idle}}
	wl := watch.Install(s.srv, ln)
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(wl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("snapshot listener failed", "addr", s.addr, "err", err)
			s.err = err
		}
	}()
	return s, nil
}

// stopped is closed when the listener has stopped serving, on its own
// (then err says why) or by shutdown; nil, a channel never closed, for a
// nil server (no --snapshot-listen).
func (s *snapshotServer) stopped() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.done
}

// shutdown stops the listener (a transfer in flight gets until ctx ends).
func (s *snapshotServer) shutdown(ctx context.Context) {
	if s == nil {
		return
	}
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}

// newSnapshotWatcher returns the Watcher of the snapshot listener's
// connections (package connwatch): what the public listener counts in
// kvroute_gateway_header_timeouts_total and
// kvroute_gateway_refused_requests_total, under names of the snapshot
// listener's own, since net/http closes a late header's connection and
// refuses a malformed request silently.
func newSnapshotWatcher() *connwatch.Watcher {
	return connwatch.New(prometheus.CounterOpts{
		Name: "kvroute_gateway_snapshot_header_timeouts_total",
		Help: "Connections to the internal snapshot listener closed because a request header did not arrive within the gateway's readHeaderTimeout.",
	}, prometheus.CounterOpts{
		Name: "kvroute_gateway_snapshot_refused_requests_total",
		Help: "Requests the internal snapshot listener's HTTP server refused before serving them: a malformed request line or header, a header over the size limit, an unsupported HTTP version.",
	})
}
