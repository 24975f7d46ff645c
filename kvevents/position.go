package kvevents

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Position is where an endpoint's stream stands: the last sequence applied
// to the index and a digest (xxhash64) of that batch's raw payload frame.
// vLLM's sequence has no epoch, so the digest is what tells a continuation
// from a restarted engine that has counted past the same number: after any
// reconnect the pool replays from Seq itself (not Seq+1) and compares the
// batch it gets with Digest. Every applied batch also records it in the
// index (Applier.applyAt, kvindex.Index.Position), so an index snapshot
// carries it and a stream started on a restored index resumes from it by
// itself; Pool.Position reports the same value, and Pool.EnsureFrom passes
// one back explicitly. Both go through the same check.
type Position struct {
	Seq    uint64 `json:"seq"`
	Digest uint64 `json:"digest"`
}

// PayloadDigest is the digest Position keeps of a raw payload frame.
func PayloadDigest(payload []byte) uint64 { return xxhash.Sum64(payload) }

// positionVersion prefixes an encoded Position, so that the index's opaque
// position bytes can change layout.
const positionVersion = 1

// positionLen is the length of an encoded Position without groups.
const positionLen = 1 + 8 + 8 + 1

// Bounds of the cache-group table carried with a position.
const (
	maxPositionGroups   = 64
	maxPositionKindLen  = 64
	positionStackGroups = 8
)

// errBadPosition rejects position bytes that are not an encoded Position.
var errBadPosition = errors.New("kvevents: not an encoded stream position")

// positionOf returns the position after applying the batch seq with this
// payload.
func positionOf(seq uint64, payload []byte) Position {
	return Position{Seq: seq, Digest: PayloadDigest(payload)}
}

// appendBinary appends the encoding the index records with each applied
// batch (kvindex.Index.Position, carried by snapshots), without a group
// table: version byte, sequence and digest (little-endian), group count 0.
func (p Position) appendBinary(b []byte) []byte { return appendPosition(b, p, nil) }

// appendPosition encodes p followed by the endpoint's cache-group kinds
// (sorted by group; at most maxPositionGroups, kinds of at most
// maxPositionKindLen bytes). vLLM names a group's kind only on BlockStored,
// so a stream resumed from a position needs them to classify the removals
// of groups it has not seen a store for yet.
func appendPosition(b []byte, p Position, groups map[int]string) []byte {
	b = append(b, positionVersion)
	b = binary.LittleEndian.AppendUint64(b, p.Seq)
	b = binary.LittleEndian.AppendUint64(b, p.Digest)
	var stack [positionStackGroups]int
	keys := stack[:0]
	for g, k := range groups {
		if g >= 0 && len(k) <= maxPositionKindLen && len(keys) < maxPositionGroups {
			keys = append(keys, g)
		}
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, g := range keys {
		b = binary.AppendUvarint(b, uint64(g))
		b = binary.AppendUvarint(b, uint64(len(groups[g])))
		b = append(b, groups[g]...)
	}
	return b
}

// decodePosition decodes appendBinary's encoding (a group table, if any, is
// validated and ignored).
func decodePosition(b []byte) (Position, error) {
	p, _, err := parsePosition(b)
	return p, err
}

// parsePosition decodes a position and its group table.
func parsePosition(b []byte) (Position, map[int]string, error) {
	if len(b) < positionLen || b[0] != positionVersion {
		return Position{}, nil, errBadPosition
	}
	p := Position{Seq: binary.LittleEndian.Uint64(b[1:]), Digest: binary.LittleEndian.Uint64(b[9:])}
	b = b[17:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxPositionGroups {
		return Position{}, nil, errBadPosition
	}
	b = b[k:]
	var groups map[int]string
	for i := uint64(0); i < n; i++ {
		g, k := binary.Uvarint(b)
		if k <= 0 || g > 1<<31 {
			return Position{}, nil, errBadPosition
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || l > maxPositionKindLen || uint64(len(b)-k) < l {
			return Position{}, nil, errBadPosition
		}
		if groups == nil {
			groups = make(map[int]string, n)
		}
		groups[int(g)] = string(b[k : k+int(l)])
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return Position{}, nil, errBadPosition
	}
	return p, groups, nil
}

// Resume outcomes: the result label of kvroute_kv_events_resumes_total,
// counted once per endpoint that started from a position recorded in the
// index (a loaded checkpoint or a peer's snapshot).
const (
	// ResumeOK: the replay returned the batch at the position with the
	// same digest (same publisher lifetime); what followed was applied.
	ResumeOK = "resumed"
	// ResumeWithGap: the replay buffer no longer holds the position. The
	// entries are kept (a stale entry costs one cache miss, a missing one
	// the whole prefix) and the stream continues from the replay window.
	ResumeWithGap = "resumed_with_gap"
	// ResumeGapCleared: as ResumeWithGap, with PoolConfig.ClearOnResumeGap
	// set: the endpoint was cleared and rebuilt from the replay window. Also
	// the outcome of an engine snapshot that replaced the entries and then
	// failed to load (a sequence out of range, an undecodable chunk):
	// rebuilt from the window too; and of any other clear before the
	// check ended (a check cut short by the live messages waiting for it:
	// rebuilt from the live stream; clearLocked).
	ResumeGapCleared = "gap_cleared"
	// ResumeRestarted: the engine restarted since the position (another
	// digest at that sequence, a shorter stream, or a live sequence at or
	// below it): the endpoint was cleared and rebuilt from sequence 0.
	ResumeRestarted = "restarted"
	// ResumeUnverified: no digest could be compared — no replay address,
	// a failing replay, or a buffer whose oldest batch is the one right
	// after the position — and the stream continued right after the
	// position, which is accepted.
	ResumeUnverified = "unverified"
	// resumeSuperseded (unexported, as resumeSnapshot is): the check had
	// not ended when a publisher restart (a sequence going backwards, a new
	// publisher identity) or a Resync cleared the endpoint and began a new
	// generation, which rebuilds it from 0, or when a new events address,
	// replay address or model replaced the endpoint's stream (Ensure),
	// whose entries are cleared with it: the position was neither
	// confirmed nor refuted.
	resumeSuperseded = "superseded"
)

// resumeMetrics counts resumes; registered next to the pool's Metrics.
type resumeMetrics struct {
	resumes *prometheus.CounterVec
}

// newResumeMetrics creates the resume counter and registers it through r
// (reused when already registered on its registry).
func newResumeMetrics(r *registrar) (*resumeMetrics, error) {
	m := &resumeMetrics{resumes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_kv_events_resumes_total",
		Help: "Endpoints started from a stream position recorded in the index (checkpoint or peer snapshot), by outcome (resumed, resumed_with_gap, gap_cleared, restarted, unverified, engine_snapshot: the position was past the replay window and the engine's snapshot replaced the entries; superseded: a publisher restart, Resync or new events address, replay address or model cleared the endpoint before the position's check ended).",
	}, []string{"pod_identifier", "result"})}
	m.resumes = register(r, m.resumes)
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

// count records one resume outcome.
func (m *resumeMetrics) count(endpoint, result string) {
	if m != nil {
		m.resumes.WithLabelValues(endpoint, result).Inc()
	}
}

// forget drops the endpoint's series (it left the pool).
func (m *resumeMetrics) forget(endpoint string) {
	if m != nil {
		m.resumes.DeletePartialMatch(prometheus.Labels{"pod_identifier": endpoint})
	}
}
