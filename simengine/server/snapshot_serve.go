package server

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/telemetry"
)

// snapshotService is the simulated engine's snapshot socket: vLLM's
// snapshot ROUTER (kv-events-config snapshot_endpoint), answering with the
// recorder's state under a publisher identity drawn at start.
type snapshotService struct {
	rec *snapshotRecorder
	srv *snapshot.Server
	id  [snapshot.PublisherIDSize]byte
}

// startSnapshots binds c.SnapshotEndpoint when set; nil otherwise.
func startSnapshots(c KVEventsConfig, f wire.Format, opts Options) (*snapshotService, error) {
	if c.SnapshotEndpoint == nil {
		return nil, nil
	}
	addr := *c.SnapshotEndpoint
	s := &snapshotService{rec: newSnapshotRecorder(f)}
	_, _ = rand.Read(s.id[:])
	srv, err := snapshot.NewServer(snapshot.ServerConfig{Addr: addr, PublisherID: s.id},
		s.rec, snapshot.Options{Set: telemetry.Set{Logger: opts.Logger}})
	if err != nil {
		return nil, fmt.Errorf("simengine: snapshot_endpoint %q: %w", *c.SnapshotEndpoint, err)
	}
	s.srv = srv
	return s, nil
}

// SnapshotEndpoint is the bound snapshot address ("tcp://host:port"), ""
// without snapshots.
func (p *EventPublisher) SnapshotEndpoint() string {
	if p.snap == nil {
		return ""
	}
	return p.snap.srv.Endpoint()
}

// SnapshotStats counts the snapshot socket's answers (zero without one).
func (p *EventPublisher) SnapshotStats() snapshot.ServerStats {
	if p.snap == nil {
		return snapshot.ServerStats{}
	}
	return p.snap.srv.Stats()
}

// snapshotUnavailableFor makes the snapshot socket answer "unavailable"
// for d from now (Config.SnapshotUnavailableFor).
func (p *EventPublisher) snapshotUnavailableFor(d time.Duration) {
	if p.snap != nil && d > 0 {
		p.snap.rec.unavailableFor(d)
	}
}

// SnapshotEndpoint is the bound KV-cache snapshot address, "" without one.
func (s *Server) SnapshotEndpoint() string {
	if s.pub == nil {
		return ""
	}
	return s.pub.SnapshotEndpoint()
}
