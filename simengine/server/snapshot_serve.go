package server

import (
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/telemetry"
)

// snapshotService is the simulated engine's snapshot socket: vLLM's
// snapshot ROUTER (kv-events-config snapshot_endpoint), answering with the
// recorder's state under a publisher identity drawn at start.
//
// With extra models (models.go) each model's engine hashes its blocks like
// the others, so each topic has a recorder of its own (topics, in the
// order added), and a reply carries the base model's chunks, then each
// extra model's after its topic frame (kvroute's several-models extension
// of the protocol, package snapshot). The publisher records every batch
// under its mutex (lock), so a reply built under it is consistent with one
// sequence for every topic.
type snapshotService struct {
	rec *snapshotRecorder
	srv *snapshot.Server
	id  [snapshot.PublisherIDSize]byte

	lock   *sync.Mutex // the EventPublisher's mu; guards topics
	topics []topicRecorder
}

// topicRecorder is an extra model's topic and its recorder.
type topicRecorder struct {
	topic []byte
	rec   *snapshotRecorder
}

// recorder returns topic's recorder (nil topic: the configured one's).
// lock is held.
func (s *snapshotService) recorder(topic []byte) *snapshotRecorder {
	for _, t := range s.topics {
		if topic != nil && string(t.topic) == string(topic) {
			return t.rec
		}
	}
	return s.rec
}

// Snapshot implements snapshot.Source: the configured topic's recorder's
// reply, followed by each extra topic's frame and chunks.
func (s *snapshotService) Snapshot() (int64, [][]byte, bool) {
	s.lock.Lock()
	defer s.lock.Unlock()
	seq, chunks, ok := s.rec.Snapshot()
	if !ok {
		return seq, chunks, ok
	}
	for _, t := range s.topics {
		ts, tc, _ := t.rec.Snapshot()
		seq = max(seq, ts) // each recorder saw its own topic's batches; the last of all is the reply's
		chunks = append(chunks, t.topic)
		chunks = append(chunks, tc...)
	}
	return seq, chunks, true
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
		s, snapshot.Options{Set: telemetry.Set{Logger: opts.Logger}})
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

// addSnapshotTopic gives an extra model's topic a recorder of its own (no
// snapshot socket: nothing).
func (p *EventPublisher) addSnapshotTopic(topic []byte, f wire.Format) {
	if p.snap == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.snap.topics = append(p.snap.topics, topicRecorder{topic: topic, rec: newSnapshotRecorder(f)})
}
