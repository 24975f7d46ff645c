package gatewaycmd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/gateway"
)

// snapshotPath is where the internal listener serves the index snapshot.
const snapshotPath = "/kvroute/snapshot"

// snapshotServer serves the router's index snapshot on an internal address
// (--snapshot-listen), apart from the public listener: the snapshot tells
// which prefixes every engine caches, and peers are the only clients.
//
// Ownership: serveSnapshot starts one goroutine, which only runs srv.Serve
// (logging its failure) and closes done when Serve returns; shutdown ends
// it (srv.Shutdown, then srv.Close should that fail, as when ctx ends
// first) and waits for done. srv serves each connection on a goroutine of
// its own, which touches no field here. addr, srv and done are set by
// serveSnapshot and not written after.
type snapshotServer struct {
	addr string
	srv  *http.Server
	done chan struct{}
}

// serveSnapshot starts the internal snapshot listener; nil when addr is
// empty or the gateway has no router (round-robin policy). A keep-alive
// connection idle for idle (the public listener's gateway.idleTimeout) is
// closed, so peers' connections cannot pile up.
func serveSnapshot(addr string, r *kvroute.Router, idle time.Duration, log *slog.Logger) (*snapshotServer, error) {
	if addr == "" || r == nil {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(snapshotPath, r.SnapshotHandler())
	s := &snapshotServer{addr: ln.Addr().String(), done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: gateway.DefaultReadHeaderTimeout, IdleTimeout: idle}}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("snapshot listener failed", "addr", s.addr, "err", err)
		}
	}()
	return s, nil
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
