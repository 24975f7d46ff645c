// Package kvevents turns the KV-cache events that vLLM and SGLang publish
// over ZeroMQ into updates of a kvindex.Index: a Pool subscribes to the
// engines, sequences each endpoint's stream (replaying what it missed), and
// its Applier applies the decoded batches to the index, with metrics for
// everything it drops or skips. The payloads are decoded by the subpackage
// kvevents/wire, which documents the wire format of every engine
// generation. The metric names follow llm-d's
// (llm_d_epp_kv_cache_events_*), with kvroute_kv_events_* for what llm-d
// does not count.
//
// # Applying
//
// Applier.Apply applies a decoded batch for one endpoint: BlockStored →
// Index.Store (the LoRA name, when present, replaces the model as the key
// root; tier from the medium; group and kind from the event), BlockRemoved →
// Index.Remove, AllBlocksCleared → Index.Clear. Before a store reaches the
// index the LoRA name, which vLLM writes as each block's first extra key,
// is removed from its extra keys (it is the root already; a later key of
// the same spelling, such as a salt, stays) and multimodal pairs become
// their identifier, matching what
// kvindex.Keys computes on the request side. An adapter's store (lora_id
// set) is never keyed under the base model: without lora_name, a typed LoRA
// key or a configured lora_id → name (ApplierConfig.LoRANames) it is
// skipped (reason "lora_unnamed"). An absent group_idx is group 0, as
// vLLM's own consumers read it, for stores and removals alike. A store
// without tokens is tier-only: the blocks it names gain its medium's tier.
// vLLM's offloading connector sends it as a placeholder with block_size 0
// and no kv_cache_spec_kind, read at the endpoint's block size and in the
// kind its group's stores taught.
//
// SGLang's cache_salt is not part of SGLang's block hashes, but kvroute keys
// blocks with its own hash of the event's tokens, not with the engine's. The
// Applier therefore turns the salt into the extra key of block 0 when the
// event starts at block 0 (no parent) — where the request side puts the
// salt, so salted requests match salted SGLang blocks exactly as for vLLM —
// and ignores it on later events, whose keys inherit the salt through the
// parent chain. Caveat: SGLang gives the salted and unsalted copies of the
// same tokens the same engine hash, so on one endpoint the index's
// engine-hash map holds only the most recent of the two.
//
// Stores that cannot be indexed (non-prefix cache kinds, non-dense spans,
// bad block sizes, invalid tokens) are counted in
// llm_d_epp_kv_cache_events_stores_skipped_total{cache_kind,reason} (cache_kind
// is one of vLLM's cache kinds, "unknown" included, "none" for an event
// without one, "other" for any other string a publisher sends); removals
// for a group never seen in a store, or for a non-prefix group, likewise.
// Stores whose parent the index does not know, and unknown event types, are
// counted in kvroute_kv_events_dropped_total{pod_identifier,reason}; a
// missing parent is also logged at debug level ("Failed to get request key
// for parent block"). A Pool's Applier shares the Pool's metrics, so each
// family is registered once. The reason labels are fixed strings (typed
// Reason values, declared in reason.go), never taken from the wire.
//
// Registration: a nil Registerer registers nothing (a Pool then keeps its
// metrics on a private registry, for Status). NewPool registers every
// collector through telemetry.Set.Register, all or none (NewPool fails and
// leaves nothing registered), and Close unregisters exactly what NewPool
// registered, so a closed Pool can be built again on the same registry.
// Several Pools and Appliers share one registry: one that finds a family
// already registered by another reuses its collector, and its Close leaves
// that shared collector registered. An Applier has no Close: on its own it
// registers (or reuses) its two families and leaves them.
//
// # Subscribing
//
// Pool keeps one supervised ZeroMQ SUB per endpoint (Ensure, Remove; or one
// bound listener per data-parallel rank in bind mode, identities from
// topic + rank, known endpoints only by default, each topic accepted only
// from the address of the endpoint it names unless
// PoolConfig.BindAnySource, each endpoint pinned to the connection that
// delivers it). Each supervisor dials
// through kvroute's guarded transport (internal/zmqx: handshake deadline,
// heartbeats, frame-size limit), recreates its socket after any receive
// error with its own backoff (100 ms doubling to 2 s), and never relies on
// go-zeromq's reconnect. Every message goes through the endpoint's stream,
// whose state machine (see the stream type) tracks sequences always:
// duplicates are dropped, a gap is replayed from the last applied sequence,
// a sequence that goes backwards clears the endpoint (the engine restarted)
// and replays from 0, and an endpoint is replayed as soon as it is
// subscribed. Replays run off the receive loop through the replay package;
// live messages that arrive meanwhile are held (bounded) and applied after
// it without duplicates. An endpoint's events apply in order on one of
// Concurrency workers with queues bounded in messages and in payload bytes
// (per worker and per endpoint); an overflow is dropped, counted and
// repaired by a catch-up replay, and it is the flooding endpoint that is
// shed, not its quiet neighbours.
//
// # Stream phases
//
// Each endpoint's stream is an explicit state machine (stream_phase.go):
// one function makes every transition, recording when the phase began
// (EndpointStatus.Phase and PhaseSince) and when the readiness state began
// (EndpointStatus.State and Since, which Router.Ready's give-up clock
// reads). Its transitions, and no others:
//
//	connecting → resuming     a recorded position is adopted
//	connecting → replaying    the connect replay starts
//	connecting → snapshot     the connect (or restart) load of the engine's snapshot starts
//	connecting → live         a first message is applied as the base
//	connecting → closed       the endpoint is removed or the pool closes
//	resuming   → replaying    the digest check of the position starts
//	resuming   → live         the position is accepted without a check
//	resuming   → connecting   a live sequence at or below it: cleared
//	resuming   → closed       the endpoint is removed or the pool closes
//	live       → replaying    a gap, drop, quiet tail, reconnect, repair or Resync
//	live       → connecting   the sequence went backwards: cleared
//	live       → closed       the endpoint is removed or the pool closes
//	replaying  → live         the replay ended with a watermark
//	replaying  → connecting   it ended without one (or cleared the endpoint)
//	replaying  → resuming     the position's check could not be made
//	replaying  → closed       the endpoint is removed or the pool closes
//	replaying  → snapshot     the buffer no longer holds the range, or the engine restarted
//	snapshot   → live         the snapshot was loaded; its sequence is the watermark
//	snapshot   → connecting   it was empty (or failed without replay): no watermark yet
//	snapshot   → replaying    a gap behind it is replayed, or it failed and the replay runs
//	snapshot   → closed       the endpoint is removed or the pool closes
//
// Two conditions run across the phases: cooling down (no replay starts:
// for ReplayCooldown after a failed replay, and while a rebuild waits for
// a replay slot; gaps then clear the endpoint instead) and degraded (the
// index may lack batches or hold stale ones). Readiness (StreamState) is
// their projection: replaying while a replay or snapshot load runs (but
// for a quiet check — a tail or join probe, or the check after a quiet
// recycle — made on a stream with no sign of loss, which keeps the state
// below); else degraded when the
// stream is degraded, or was caught up once and lost its connection; else
// live when connected and caught up (or without replay address); else
// connecting.
//
// # Liveness and engine lifetimes
//
// vLLM publishes nothing while idle, so silence proves nothing. Each
// subscription sends ZMTP PINGs (PoolConfig.HeartbeatInterval, default 2 s)
// that libzmq answers by itself, and answers the engine's own PINGs: a quiet
// engine keeps its connection indefinitely, and a frozen or partitioned one
// (SIGSTOP keeps its TCP connection open) fails within HeartbeatTimeout
// (default 5 s) and is redialled. With heartbeats off, the idle deadline
// recycles quiet sockets without counting an error or a reconnection, and
// without changing the endpoint's readiness state: the check after a
// recycle is a quiet one, and the socket counts as up until it is redialled
// or fails. A
// supervisor's backoff is reset only by a session that delivered valid
// messages, and its failure logs are rate-limited.
//
// Bind mode heartbeats every engine connection the same way (its
// listeners send the PINGs; with heartbeats off the idle deadline applies
// instead): a frozen or vanished engine's connection is closed within
// HeartbeatTimeout, the endpoints it owned show as not connected
// (EndpointStatus.Connected false, state degraded once they were live)
// and count the loss in zmq_errors_total{operation="recv"}, and the
// engine's next connection takes them over when it next publishes.
//
// When a stream goes quiet after traffic, its replay socket is asked once
// (PoolConfig.TailProbeDelay, default 1 s) for anything after the
// watermark: batches a publisher's high-water mark dropped at the end of a
// burst are repaired then, not at the engine's next batch. After every
// reconnect (in bind mode: when an engine connection takes the endpoint
// over, before its first message is applied), and in every tail probe, the
// stream replays from its watermark itself and compares the
// batch there with the digest it kept of the payload it applied (Position);
// a different batch, or none where one must still be buffered, means the
// engine restarted while the subscriber was away, which a sequence without
// epoch cannot show otherwise. (A tail probe can fall due while the
// subscriber is reconnecting to a restarted engine: unchecked, it would
// apply the new lifetime's batches on top of the old one's entries.)
// A connect replay that finds the engine's buffer empty is followed, a
// TailProbeDelay later, by one join probe from 0: the subscription is set
// up while that replay runs, and a batch the engine published before its
// PUB socket had the SUBSCRIBE (ZeroMQ's slow joiner) reached neither;
// without the probe an engine that then idled kept those blocks out of the
// index until its next batch. Checks that find nothing missing count in
// kvroute_kv_events_probes_total, not as replays.
//
// Replays end exact or say they did not. vLLM's replay ROUTER drops replies
// past its send high-water mark (1,000 queued), so a long replay can arrive
// with holes; the replay client then asks again from the first missing
// sequence, paced and bounded (see package replay). A replay that still
// gives up with sequences it knows were published missing leaves the
// endpoint degraded (never live, even with the engine idle) and a repair
// replay from the watermark is tried once per ReplayCooldown until the
// hole is filled.
//
// Replays are bounded: a sequence more than ReplayLookahead (a small slack,
// 1,000) beyond what the live stream has shown ends the replay as a counted
// protocol error, whatever the replay's pace, and if the watermark had
// already passed the live stream the endpoint is cleared and rebuilt from
// it, so live messages are never skipped as already applied (an engine
// snapshot's sequence is held to the same slack, behind and ahead, and
// refused as seq_out_of_range otherwise); a replay that live
// messages wait for and that has not covered them at ReplayMinRate after
// ReplayGrace (waiting for one of the process-wide replay slots included)
// (a fresh engine's included, whose first live message is the replay's
// start) is cut short (replays_total{result="cut_short"}) and the endpoint
// applies its live stream; what that leaves out (batches published before
// the first held message) keeps the endpoint degraded until a rebuild from
// 0 recovers it: the rebuild waits for its replay slot without holding the
// live stream and replaces the entries once the publisher answers (at once
// after a replay starved of slots, else one ReplayCooldown later); live
// messages a running replay has covered are applied at once;
// kvroute_kv_events_replay_in_progress and
// kvroute_kv_events_replay_slot_wait_seconds show stuck endpoints and
// queueing. A snapshot load that live messages wait for has the same
// allowance for its reply, or is abandoned for the replay
// (snapshot_errors_total{reason="stalled"}). zmq_errors_total and
// snapshot_errors_total count the engine's failures only: the attempt of a replay or snapshot load kvroute gives up
// itself (superseded by a restart or Resync, cut short, the endpoint
// removed, the pool closing) is not counted. An endpoint whose model is configured nowhere takes it for
// replayed batches from the replies' topic frame, or from the last live
// message seen; legacy replies (no topic frame) with nothing seen yet are
// applied under PoolConfig.Model at once, so an idle engine is indexed, and
// if the first live message then names another model the endpoint is
// cleared (counted, reason "model_mismatch") and replayed under that one.
//
// Endpoint.Engine says what publishes: "vllm" (the default), "sglang",
// "trtllm" or "noreplay". SGLang's replay socket is off unless its
// kv-events config sets replay_endpoint, so its endpoints replay only from
// an explicit ReplayAddress (PoolConfig.Replay derives none for them, and
// an SGLang fleet produces no replay errors); TensorRT-LLM replays as vLLM
// does.
//
// vLLM's snapshot revision gives each publisher lifetime a 16-byte
// identity and makes an idle publisher send an empty batch every second
// (stream_liveness.go): a new identity clears and replays the endpoint at
// once (kvroute_kv_events_publisher_identity_changes_total, and
// publisher_restarts_total), and a publisher seen sending either that
// falls silent for PoolConfig.PublisherSilence is degraded until it is
// heard again (kvroute_kv_events_heartbeat_timeouts_total), its socket
// open or not; such a publisher is not tail-probed, since its next
// heartbeat shows a lost tail as a gap. SGLang with snapshots on names
// its publisher's lifetime in the topic ("\x00sgl-kv-epoch=<epoch>" after
// it; topic_epoch.go): a new epoch is a new identity the same way, but
// SGLang sends no heartbeats, so its silence is not judged, and its
// snapshot barriers (empty batches on a topic that also names the
// barrier) are not heartbeats. Engines without an identity keep the
// sequence and digest checks above. The revision's locality, ownership and session_id are
// decoded but not keyed on by the index, and counted in
// kvroute_kv_events_unindexed_fields_total{field}.
//
// # Resuming from a checkpoint
//
// Position is an endpoint's stream position: the last applied sequence and
// the xxhash64 of that batch's raw payload frame (PayloadDigest). Each
// applied batch records it in the index — with the endpoint's cache-group
// kinds, since vLLM names a group's kind only on BlockStored — under the
// endpoint's kvindex.PositionLock, held across the whole batch by the
// Pool's Applier, so an index snapshot holds each endpoint exactly as of
// one recorded position and never half a batch. A stream created for an
// endpoint whose entries carry a position (a loaded checkpoint or a peer's
// snapshot) starts from it when it first connects; Pool.EnsureFrom(ep, pos)
// gives one explicitly (Pool.Position reports it). Either way the check is
// the reconnect check of every stream: replay from pos.Seq itself and
// compare the digest. The same digest continues the stream, applying only
// what follows (no batch twice); another digest or an empty answer means
// the engine restarted, and the endpoint is cleared and rebuilt from 0; a
// replay buffer that no longer reaches the position keeps the loaded
// entries and continues from the window (PoolConfig.ClearOnResumeGap
// clears instead). Outcomes are counted in
// kvroute_kv_events_resumes_total{pod_identifier,result}; a publisher
// restart, a Resync or a new events address, replay address or model
// (Ensure replaces the stream) that clears the endpoint before the check
// ends counts the resume as "superseded", and any other clear before it
// ends (a check cut short by the live messages waiting for it) as
// "gap_cleared".
//
// # Publishing
//
// The engine side lives in the subpackage kvevents/publish: a Go PUB for
// engines written in Go, simulators and tests, with vLLM's framing, a replay
// ROUTER and bounded memory. A router never needs it.
package kvevents
