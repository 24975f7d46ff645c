package kvevents

import (
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// The model of a replayed batch. Blocks are keyed under the endpoint's base
// model, which comes from the endpoint's configuration, else from the topic
// of its messages (kv@<ip:port>@<model>), else PoolConfig.Model. Live
// messages always carry the topic; replay replies carry it only in vLLM's
// current layout — the legacy layout (vLLM before the topic frame, SGLang)
// is [seq, payload]. A replayed batch is therefore applied under, in order:
//
//  1. the endpoint's configured model, or the model of a live message
//     already applied;
//  2. the reply's topic frame (current layout);
//  3. the model of the last live message the receiver saw on this stream
//     (one still queued, or held behind the replay);
//  4. otherwise the pool's default (PoolConfig.Model, or none): what a live
//     message on vLLM's default empty topic is keyed under. This is a
//     guess, so the first live message checks it: if its topic names
//     another model the endpoint is cleared (every batch it held counted as
//     dropped, reason "model_mismatch"; after a running replay ends) and
//     replayed again from 0 under the named model.
//
// An idle engine's buffered batches are thus indexed by the connect replay
// alone, whatever the reply layout, instead of waiting for the engine's next
// batch to name the model.

// replayModelLocked returns the model to apply a replayed batch under, and
// whether it is the guess of rule 4. unknown reports a topic naming a model
// the endpoint does not serve, while it lists Endpoint.Models (the caller
// counts it when it applies the batch, as the receiver counts a live one).
func (st *stream) replayModelLocked(topic []byte) (model string, guessed, unknown bool) {
	s := &st.s
	if topic != nil && len(st.cfgModels) > 0 {
		// An endpoint serving several models: its reply's topic names the
		// batch's model (modelFor's rule, as for a live message).
		_, tm, _ := wire.ParseTopic(topic)
		m, unknown := st.modelFor(tm)
		if m != "" {
			return m, false, unknown
		}
	}
	if s.model != "" {
		return s.model, false, false
	}
	if topic != nil {
		_, model, _ = wire.ParseTopic(topic)
		s.model = model
		return model, false, false
	}
	if m := st.liveModel.Load(); m != nil {
		return *m, false, false
	}
	return "", true, false
}

// noteReplayModelLocked records what the model of a replayed batch just
// applied was taken from: the guess of rule 4, or a topic naming a model
// the endpoint does not serve (kvroute_kv_events_topic_model_unknown_total).
func (st *stream) noteReplayModelLocked(guessed, unknown bool) {
	if guessed {
		st.s.modelGuessed = true
	}
	if unknown && st.p.m != nil {
		st.p.m.TopicModelUnknown.WithLabelValues(st.id).Inc()
	}
}

// checkGuessedModelLocked runs for every live message before it is
// sequenced: the first one after batches were applied under the guessed
// model confirms the guess, or clears the endpoint so that the join replay
// indexes them again under the model the message names. While a replay
// runs the clear waits for its end (rekeyLocked), so that one replay at a
// time touches the endpoint.
func (st *stream) checkGuessedModelLocked(model string) {
	s := &st.s
	if !s.modelGuessed {
		return
	}
	s.modelGuessed = false
	if model == "" || model == st.p.cfg.Model || !s.has {
		return // the pool's default is the live stream's model too
	}
	s.modelWrong = true
	if !s.replaying {
		st.rekeyLocked()
	}
}

// rekeyLocked clears an endpoint whose replayed batches were keyed under a
// wrong guessed model and reports whether it did; the caller (the next live
// message's join replay, or an explicit replay from 0) indexes them again
// under the model now known.
func (st *stream) rekeyLocked() bool {
	s := &st.s
	if !s.modelWrong {
		return false
	}
	n := int(s.sinceClear) // the guessed batches and any applied after them
	// No pending resume here: the guessed batches came from a replay, and
	// a replay's first batch decides a pending position (every replay
	// while one is pending starts at it, planReplayLocked).
	removed := st.clearLocked()
	s.needJoin = true
	st.p.m.drop(st.id, dropModelMismatch, n)
	st.log.Warn("Replayed batches were keyed under the pool's default model, but the topic names another: endpoint cleared and replayed under it",
		"default_model", st.p.cfg.Model, "topic_model", s.model, "batches", n, "blocks_removed", removed)
	return true
}

// modelFor returns the model a message whose topic names topicModel is
// indexed under: the endpoint's configured model, or topicModel when the
// endpoint has none or lists it among its further served models
// (Endpoint.Models). unknown reports a topic naming a model outside both,
// while the endpoint lists Models (counted by the caller).
func (st *stream) modelFor(topicModel string) (model string, unknown bool) {
	switch {
	case st.cfgModel == "":
		return topicModel, false
	case topicModel == "" || topicModel == st.cfgModel:
		return st.cfgModel, false
	case slices.Contains(st.cfgModels, topicModel):
		return topicModel, false
	}
	return st.cfgModel, len(st.cfgModels) > 0
}

// Engine hashes of an endpoint serving several models. The index maps each
// endpoint's engine hashes to router keys in one table per endpoint, but
// the engines behind an address serving two models hash blocks alike (two
// vLLM processes with sha256_cbor and the same seed give identical tokens
// identical hashes): model B's store of a prompt model A also holds would
// take over A's engine hash, dropping A's block from the index, and a
// removal on one model's topic would remove the other's. So the hashes of a
// further model's batches (a topic naming one of Endpoint.Models other
// than Endpoint.Model) are XORed with a salt drawn from the model's name
// before they are applied: a bijection per model, so its stores, parents
// and removals stay consistent with each other, and distinct from the base
// model's and every other model's hashes but with probability 2^-64. The
// base model's hashes are applied as they come, so an endpoint's entries,
// checkpoints and positions are those of a one-model endpoint whatever
// Models it lists, and an index snapshot (checkpoint, peer bootstrap)
// keeps each model's blocks under its own model: router keys carry the
// model, and the salted engine hashes are what the restored stream's
// batches map to again.

// hashSalt returns the salt of model's engine hashes on this endpoint: 0
// for its configured model (or an endpoint listing no further models).
func (st *stream) hashSalt(model string) uint64 {
	if len(st.cfgModels) == 0 || model == st.cfgModel || model == "" {
		return 0
	}
	return modelHashSalt(model)
}

// modelHashSalt is the value a further model's engine hashes are XORed
// with on an endpoint serving several models (never 0).
func modelHashSalt(model string) uint64 {
	return xxhash.Sum64String("kvroute/model-hash-salt\x00"+model) | 1
}

// saltHashes XORs every engine hash of b (stores, removals and parents)
// with salt; 0 leaves b as it is.
func saltHashes(b *wire.Batch, salt uint64) {
	if salt == 0 {
		return
	}
	for i := range b.Events {
		e := &b.Events[i]
		for j := range e.BlockHashes {
			e.BlockHashes[j] ^= salt
		}
		if e.HasParent {
			e.ParentHash ^= salt
		}
	}
}
