package gatewaycmd

import (
	"log/slog"
	"time"

	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/telemetry"
)

// drainClock times --drain-timeout's window; tests replace it with a
// telemetry.Manual clock.
var drainClock telemetry.Clock = telemetry.Wall

// drainWindow drains srv (gateway.Server.Drain: /ready answers 503, every
// request is still served, connections close after their response) for d,
// the window in which a Kubernetes Service's endpoints, or a load balancer
// probing /ready, stop sending new requests to this replica. A listener
// that fails meanwhile ends the window early; its error is returned as
// Run's serve or snapshot error. snap is nil without --snapshot-listen.
func drainWindow(srv *gateway.Server, snap *snapshotServer, d time.Duration, log *slog.Logger) (serveErr, snapErr error) {
	srv.Drain()
	log.Info("draining before shutdown", "drain_timeout", d)
	t := drainClock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-srv.Done():
		serveErr = srv.Err()
	case <-snap.stopped():
		snapErr = snap.err
	}
	return serveErr, snapErr
}
