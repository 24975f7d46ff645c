package kvevents

import (
	"context"

	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// applySnapshot clears the endpoint and applies r's chunks on the worker,
// releasing each one; the worker keeps sequencing other endpoints between
// chunks. A reply of another publisher lifetime than the live stream's is
// refused before the endpoint is cleared.
func (st *stream) applySnapshot(ctx context.Context, gen uint64, r *snapshot.Reply, blocks *int) error {
	var verdict error
	step := func(f func(dec *wire.Decoder, b *wire.Batch) error) error {
		if !st.onWorker(ctx, func(dec *wire.Decoder, b *wire.Batch) {
			st.lock()
			defer st.unlock()
			if st.s.closed || st.s.gen != gen {
				verdict = errSuperseded
				return
			}
			verdict = f(dec, b)
		}) {
			return errSuperseded
		}
		return verdict
	}
	if err := step(func(*wire.Decoder, *wire.Batch) error {
		if err := st.foreignSnapshotLocked(r.PublisherID); err != nil {
			return err // refused before anything is cleared: the entries stay
		}
		resume := st.s.rs.pending // the recorded entries are given up for the snapshot
		st.s.rs.pending = false   // counted when the load ends (finishSnapshotLocked), not by clearLocked
		removed := st.clearLocked()
		st.s.rs.replaced = resume
		st.log.Debug("Endpoint cleared for the engine's snapshot", "blocks_removed", removed)
		return st.claimSnapshotLocked(r.PublisherID)
	}); err != nil {
		return err
	}
	pos := Position{Seq: uint64(max(r.Seq, 0))}
	var refs snapshotRefs // the program's reference counts (snapshot_refs.go)
	for i := range r.Chunks {
		err := step(func(dec *wire.Decoder, b *wire.Batch) error {
			if err := dec.Decode(r.Chunks[i], b); err != nil {
				st.p.snm.refused(st.id, "chunk_decode")
				return err
			}
			model := st.snapshotChunkModelLocked(r.ChunkTopics, i)
			saltHashes(b, st.hashSalt(model)) // before the reference counts: each model's hashes apart
			refs.filter(b)
			res := st.p.applier.applyAt(st.id, model, b, pos)
			*blocks += res.StoredBlocks
			return nil
		})
		r.Chunks[i] = nil // applied: its memory can go
		if err != nil {
			return err
		}
	}
	return nil
}

// snapshotChunkModelLocked is the model chunk i of a snapshot reply is
// applied under: the stream's model, or with kvroute's several-models
// extension the model its topic frame names (modelFor's rule, as for a
// live message of that topic; a model the endpoint does not serve is
// counted in kvroute_kv_events_topic_model_unknown_total).
func (st *stream) snapshotChunkModelLocked(topics [][]byte, i int) string {
	if i >= len(topics) || topics[i] == nil {
		return st.s.model
	}
	_, tm, _ := wire.ParseTopic(topics[i])
	m, unknown := st.modelFor(tm)
	if unknown && st.p.m != nil {
		st.p.m.TopicModelUnknown.WithLabelValues(st.id).Inc()
	}
	if m == "" {
		return st.s.model
	}
	return m
}
