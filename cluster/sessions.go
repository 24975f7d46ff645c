package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Session affinity shared between replicas. A replica that routes a turn
// of a session (package session) queues the session's key hash and the
// chosen endpoint; the publisher sends them, with the decisions of the same
// few milliseconds, as a session message on the pool's decision channel,
// and every other replica stores them in its own session store. So a
// session whose last turn went through replica A is preferred on the same
// endpoint by replica B from the next message on (PublishInterval plus a
// round trip), and no replica calls Redis on the request path.
//
//	sessions := 'S' version(1) sender:str n:uvarint { key:8 bytes endpoint:str ageMs:uvarint }×n
//
// The key is the session key's 64-bit hash (the key itself never leaves
// the replica); ageMs is how long before the send the turn was routed, so
// the receiver dates the record on its own clock. Everything is checked: a
// message that does not decode whole is counted
// (kvroute_cluster_invalid_messages_total) and nothing of it applied, an
// endpoint that is not one of the replica's own is dropped and counted
// (kvroute_cluster_endpoints_dropped_total), an age above a day is
// counted and dropped. A replica of an older version counts the messages as
// invalid and ignores them. The queue is bounded and preallocated
// (sessionQueueSize records, double-buffered); a full queue, a failed
// publish or a degraded replica drops records, counted in
// kvroute_cluster_sessions_dropped_total.
const (
	sessionMagic       = 'S'
	sessionWireVersion = 1
	// sessionQueueSize bounds the records queued between two flushes.
	sessionQueueSize = 4096
	// maxSessionAge bounds a record's age: a session's TTL is minutes.
	maxSessionAge = 24 * time.Hour
)

// sessionRecord is one queued record.
type sessionRecord struct {
	key      uint64
	endpoint string
	at       time.Time
}

// sessionShare is the state of ShareSessions: the bounded queue of this
// replica's records and the sink of the peers'.
type sessionShare struct {
	mu     sync.Mutex
	active []sessionRecord
	spare  []sessionRecord
	n      int
	apply  func(key uint64, endpoint []byte, age time.Duration)
	gen    uint64 // ShareSessions calls so far: whose stop still applies
}

type sessionMetrics struct {
	published, applied, ignored prometheus.Counter
	dropped                     [numDrops]prometheus.Counter
}

func (m *sessionMetrics) init() []prometheus.Collector {
	m.published = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_cluster_sessions_published_total",
		Help: "Session affinity records (a session's key hash and endpoint) sent to the other replicas.",
	})
	m.applied = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_cluster_sessions_applied_total",
		Help: "Session affinity records received from other replicas and given to the session store.",
	})
	m.ignored = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_cluster_sessions_ignored_total",
		Help: "Session messages from other replicas ignored because this replica does not share sessions (its peers do: their configurations differ).",
	})
	drops := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_cluster_sessions_dropped_total",
		Help: "Session affinity records not shared, by reason (queue_full, redis_error).",
	}, []string{"reason"})
	for i := range m.dropped {
		m.dropped[i] = drops.WithLabelValues(dropNames[i])
	}
	return []prometheus.Collector{m.published, m.applied, m.ignored, drops}
}

// ShareSessions makes the replica publish the session records given to
// PublishSession and hand the peers' records to apply: the session's key
// hash, the endpoint (one of this replica's endpoints, checked; valid only
// during the call) and how long ago the peer routed the turn. apply runs
// on the subscription's goroutine and must not block. nil stops applying.
// Shared decisions must be on (sessions ride their channel); otherwise it
// does nothing. Package session's Affinity.Share calls it.
//
// stop stops applying with apply unless a later ShareSessions replaced it
// meanwhile, so that a sharer that closes after another took the replica
// over leaves the other's sharing alone.
func (r *Replica) ShareSessions(apply func(key uint64, endpoint []byte, age time.Duration)) (stop func()) {
	if r == nil {
		return func() {}
	}
	s := &r.sessions
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		s.active = make([]sessionRecord, sessionQueueSize)
		s.spare = make([]sessionRecord, sessionQueueSize)
	}
	s.gen++
	gen := s.gen
	s.apply = apply
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gen == gen {
			s.apply = nil
		}
	}
}

// PublishSession queues a session record for the other replicas: the
// session whose key hashes to key was routed to endpoint now. It never
// blocks on Redis and does not allocate; a full queue drops the record
// (counted). It does nothing on a nil Replica, before ShareSessions, or
// with shared decisions off.
func (r *Replica) PublishSession(key uint64, endpoint string) {
	if r == nil || r.cfg.DisableSharedDecisions {
		return
	}
	s := &r.sessions
	s.mu.Lock()
	if s.active == nil || s.apply == nil {
		s.mu.Unlock()
		return
	}
	if s.n == len(s.active) {
		s.mu.Unlock()
		r.met.sessions.dropped[dropQueueFull].Inc()
		return
	}
	s.active[s.n] = sessionRecord{key: key, endpoint: endpoint, at: r.now()}
	s.n++
	s.mu.Unlock()
	select { // the decisions' publisher sends the sessions too
	case r.q.wake <- struct{}{}:
	default:
	}
}

// takeSessions swaps the queue's halves and returns what was queued,
// valid until the next call (from the publisher's goroutine only).
func (r *Replica) takeSessions() []sessionRecord {
	s := &r.sessions
	s.mu.Lock()
	defer s.mu.Unlock()
	full := s.active[:s.n]
	s.active, s.spare, s.n = s.spare, s.active, 0
	return full
}

// flushSessions sends the queued session records, as many per message as
// fit flushBytes, reusing buf.
func (r *Replica) flushSessions(buf []byte) []byte {
	recs := r.takeSessions()
	now := r.now()
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && size < flushBytes {
			size += len(recs[n].endpoint) + 16
			n++
		}
		buf = appendSessionHeader(buf[:0], r.cfg.ReplicaID, n)
		for _, rec := range recs[:n] {
			buf = appendSessionRecord(buf, rec.key, rec.endpoint, uint64(max(0, now.Sub(rec.at).Milliseconds())))
		}
		r.sendSessions(buf, n)
		clear(recs[:n]) // drop the endpoint references
		recs = recs[n:]
	}
	return buf
}

// appendSessionHeader starts a session message from sender holding n
// records.
func appendSessionHeader(b []byte, sender string, n int) []byte {
	b = append(b, sessionMagic, sessionWireVersion)
	b = appendStr(b, sender)
	return binary.AppendUvarint(b, uint64(n))
}

// appendSessionRecord appends one record to a session message.
func appendSessionRecord(b []byte, key uint64, endpoint string, ageMs uint64) []byte {
	b = binary.LittleEndian.AppendUint64(b, key)
	b = appendStr(b, endpoint)
	return binary.AppendUvarint(b, ageMs)
}

func (r *Replica) sendSessions(msg []byte, n int) {
	if r.Degraded() {
		r.met.sessions.dropped[dropRedis].Add(float64(n))
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
	defer cancel()
	err := r.store.Publish(ctx, r.keys.channel, msg)
	r.countCommands(1)
	if err != nil {
		r.met.sessions.dropped[dropRedis].Add(float64(n))
		r.result(opPublish, err)
		return
	}
	r.met.sessions.published.Add(float64(n))
}

// applySessions decodes a session message and hands its records to the
// sink, skipping this replica's own. Nothing of a malformed message is
// applied.
func (r *Replica) applySessions(payload []byte) {
	r.sessions.mu.Lock()
	apply := r.sessions.apply
	r.sessions.mu.Unlock()
	if apply == nil {
		r.met.sessions.ignored.Inc()
		return
	}
	if err := decodeSessions(payload, nil); err != nil { // check the whole message first
		r.met.invalidMsgs.Inc()
		return
	}
	_ = decodeSessions(payload, func(sender, endpoint []byte, key uint64, age time.Duration) {
		if string(sender) == r.cfg.ReplicaID || !r.accepts(endpoint) {
			return
		}
		apply(key, endpoint, age)
		r.met.sessions.applied.Inc()
	})
}

// decodeSessions decodes a session message, calling fn (when not nil) for
// each record; every bound is checked.
func decodeSessions(payload []byte, fn func(sender, endpoint []byte, key uint64, age time.Duration)) error {
	if len(payload) > maxMessageBytes {
		return fmt.Errorf("%w: session message over %d bytes", errMalformed, maxMessageBytes)
	}
	rd := reader{b: payload}
	if rd.byte1("magic") != sessionMagic || rd.byte1("version") != sessionWireVersion {
		rd.fail("not a version-1 session message")
	}
	sender := rd.bytes("sender", maxNameBytes)
	n := rd.count("session count", maxMessageBytes/10, 10)
	for i := 0; i < n && rd.err == nil; i++ {
		if len(rd.b) < 8 {
			rd.fail("session key")
			break
		}
		key := binary.LittleEndian.Uint64(rd.b)
		rd.b = rd.b[8:]
		ep := rd.bytes("endpoint", maxNameBytes)
		ageMs := rd.uvarint("age")
		if rd.err == nil && ageMs > uint64(maxSessionAge.Milliseconds()) {
			rd.fail("session age over a day")
		}
		if rd.err == nil && fn != nil {
			fn(sender, ep, key, time.Duration(ageMs)*time.Millisecond)
		}
	}
	if rd.err == nil && len(rd.b) != 0 {
		rd.fail("trailing bytes")
	}
	return rd.err
}
