package kvevents

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// heldUnder is heldBlocks under model.
func heldUnder(ix *kvindex.Index, endpoint, model string, seq uint64) int {
	keys := kvindex.Keys(nil, poolTokens(seq, poolBlocks), poolBlockSize, &kvindex.KeyParams{Model: model})
	var res kvindex.MatchResult
	ix.Match(keys, []string{endpoint}, &res)
	return res.Endpoints()[0].Blocks
}

// An endpoint serving two models (Endpoint.Models) keeps both in the index:
// each message is keyed under its topic's model when the endpoint serves
// it; a topic naming a model it does not serve is keyed under its
// configured model and counted.
func TestStreamIndexesUnderTheTopicsServedModel(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 0, "")
	defer f.close()
	f.st.cfgModels = []string{poolModel, "beta"}
	sub := &subscriber{p: f.p, ep: Endpoint{ID: seqID, Model: poolModel}, st: f.st}
	topic := func(model string) []byte { return wire.AppendTopic(nil, seqID, model) }

	f.st.receive(0, poolPayload(0), sub.model(topic(poolModel)))
	f.st.receive(1, poolPayload(1), sub.model(topic("beta")))
	f.st.receive(2, poolPayload(2), sub.model(topic("gamma")))
	f.st.receive(3, poolPayload(3), sub.model(topic("gamma")))
	f.st.receive(4, poolPayload(4), sub.model([]byte(""))) // vLLM's default empty topic
	waitApplied(t, f.p, seqID, 4)

	require.Equal(t, poolBlocks, heldUnder(f.ix, seqID, poolModel, 0))
	require.Zero(t, heldUnder(f.ix, seqID, "beta", 0))
	require.Equal(t, poolBlocks, heldUnder(f.ix, seqID, "beta", 1), "the second model's blocks")
	require.Zero(t, heldUnder(f.ix, seqID, poolModel, 1))
	for _, s := range []uint64{2, 3, 4} {
		require.Equal(t, poolBlocks, heldUnder(f.ix, seqID, poolModel, s), "batch %d under the configured model", s)
	}
	require.InDelta(t, 2, counter(f.p.metrics().TopicModelUnknown, seqID), 0, "both gamma messages counted")
}

// Replayed batches follow the live messages' rule: on an endpoint listing
// Models, a reply whose topic names a model it does not serve is indexed
// under its configured model and counted, once per batch applied (a reply
// the live stream applied already was counted when it arrived). Before,
// replayed batches were indexed so without being counted.
func TestStreamCountsReplayedUnknownTopicModel(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 100, "")
	defer f.close()
	f.st.cfgModels = []string{poolModel, "beta"}
	for s, model := range []string{"gamma", "beta", "gamma"} {
		f.buf.Add(uint64(s), wire.AppendTopic(nil, seqID, model), poolPayload(uint64(s)))
	}
	f.st.onConnect(false) // the connect replay of an idle engine: 0..2
	f.wait(2)
	require.Equal(t, poolBlocks, heldUnder(f.ix, seqID, poolModel, 0), "gamma's batch under the configured model")
	require.Equal(t, poolBlocks, heldUnder(f.ix, seqID, "beta", 1))
	require.Equal(t, poolBlocks, heldUnder(f.ix, seqID, poolModel, 2))
	require.InDelta(t, 2, counter(f.p.metrics().TopicModelUnknown, seqID), 0, "both gamma batches counted")

	f.st.onConnect(false) // the reconnect check replays 2 again, applied already: not counted again
	require.Eventually(t, func() bool { return f.count("replays", replayComplete) == 1 && !f.status().Replaying },
		poolWait, poolTick, f.logs.String())
	require.Eventually(t, func() bool { return counter(f.p.sm.Probes, seqID, probeEmpty) == 1 }, poolWait, poolTick, f.logs.String())
	require.InDelta(t, 2, counter(f.p.metrics().TopicModelUnknown, seqID), 0)
}

func TestStreamModelFor(t *testing.T) {
	st := &stream{cfgModel: "a", cfgModels: []string{"a", "b"}}
	for topic, want := range map[string]struct {
		model   string
		unknown bool
	}{"": {"a", false}, "a": {"a", false}, "b": {"b", false}, "c": {"a", true}} {
		m, u := st.modelFor(topic)
		require.Equal(t, want.model, m, topic)
		require.Equal(t, want.unknown, u, topic)
	}
	m, u := (&stream{cfgModel: "a"}).modelFor("c")
	require.Equal(t, "a", m, "one model configured: as before")
	require.False(t, u, "no Models listed: not counted")
	m, _ = (&stream{}).modelFor("c")
	require.Equal(t, "c", m, "no model configured: the topic's")
}

// The engines behind an endpoint serving two models hash identical tokens
// identically (two vLLM processes with sha256_cbor and one seed): both
// models' copies of a prompt stay in the index, and a removal on one
// model's topic removes that model's block only.
func TestStreamKeepsBothModelsOfACollidingEngineHash(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 0, "")
	defer f.close()
	f.st.cfgModels = []string{poolModel, "beta"}
	sub := &subscriber{p: f.p, ep: Endpoint{ID: seqID, Model: poolModel}, st: f.st}
	topic := func(model string) []byte { return wire.AppendTopic(nil, seqID, model) }
	removal := func(hashes ...uint64) []byte {
		return wire.AppendBatch(nil, &wire.Batch{Events: []wire.Event{{Type: wire.EventBlockRemoved,
			BlockHashes: hashes, Medium: "GPU", HasGroup: true}}, HasDPRank: true}, wire.FormatVLLM)
	}

	f.st.receive(0, poolPayload(0), sub.model(topic(poolModel)))
	f.st.receive(1, poolPayload(0), sub.model(topic("beta"))) // the same tokens and engine hashes
	waitApplied(t, f.p, seqID, 1)
	require.Equal(t, poolBlocks, heldUnder(f.ix, seqID, poolModel, 0), "the base model's copy survives the other's store")
	require.Equal(t, poolBlocks, heldUnder(f.ix, seqID, "beta", 0))

	last := uint64(1000 + poolBlocks - 1) // poolBatch(0)'s last engine hash
	f.st.receive(2, removal(last), sub.model(topic("beta")))
	waitApplied(t, f.p, seqID, 2)
	require.Equal(t, poolBlocks-1, heldUnder(f.ix, seqID, "beta", 0), "beta's last block removed")
	require.Equal(t, poolBlocks, heldUnder(f.ix, seqID, poolModel, 0), "the base model's untouched")
	f.st.receive(3, removal(last), sub.model(topic(poolModel)))
	waitApplied(t, f.p, seqID, 3)
	require.Equal(t, poolBlocks-1, heldUnder(f.ix, seqID, poolModel, 0))

	// A further block of beta chained on its parent's (salted) hash.
	next := poolBatch(0, poolBlocks)
	f.st.receive(4, wire.AppendBatch(nil, &wire.Batch{Events: []wire.Event{{Type: wire.EventBlockStored,
		BlockHashes: []uint64{last}, HasParent: true, ParentHash: last - 1, TokenIDs: next.Events[0].TokenIDs[(poolBlocks-1)*poolBlockSize:],
		BlockSize: poolBlockSize, Medium: "GPU", HasGroup: true, Kind: "full_attention"}}, HasDPRank: true}, wire.FormatVLLM),
		sub.model(topic("beta")))
	waitApplied(t, f.p, seqID, 4)
	require.Equal(t, poolBlocks, heldUnder(f.ix, seqID, "beta", 0), "beta's parent found under its salted hash")
	require.Equal(t, poolBlocks-1, heldUnder(f.ix, seqID, poolModel, 0))
	require.Zero(t, counter(f.p.metrics().TopicModelUnknown, seqID))
}

// An index snapshot (checkpoint, peer bootstrap) of an endpoint serving two
// models keeps each model's blocks under its model, and a router started
// from it resumes the stream: the other model's removals and stores
// published meanwhile find its blocks under their (salted) engine hashes,
// and the base model's are untouched.
func TestPoolResumesATwoModelEndpointFromSnapshot(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: resumeID, Model: poolModel, ReplayAddr: "127.0.0.1:0", BufferSize: 100})
	defer pub.Close()
	beta := wire.AppendTopic(nil, resumeID, "beta")
	send := func(topic []byte, payload []byte) {
		t.Helper()
		var err error
		if topic == nil {
			_, err = pub.Publish(payload)
		} else {
			_, err = pub.PublishTopic(topic, payload)
		}
		require.NoError(t, err)
	}
	ep := Endpoint{ID: resumeID, Model: poolModel, Models: []string{poolModel, "beta"}, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}
	start := func(ix *kvindex.Index, last uint64) (*Pool, *prometheus.Registry) {
		t.Helper()
		reg := prometheus.NewRegistry()
		p, err := NewPool(PoolConfig{}, ix, Options{Set: telemetry.Set{Registerer: reg}})
		require.NoError(t, err)
		require.NoError(t, p.Ensure(ep))
		waitApplied(t, p, resumeID, last)
		return p, reg
	}

	send(nil, poolPayload(0))  // alpha
	send(beta, poolPayload(0)) // beta: the same tokens and engine hashes
	first := newPoolIndex(t)
	p1, _ := start(first, 1)
	require.NoError(t, p1.Close())
	data := snap(t, first)

	ix := loaded(t, data)
	require.Equal(t, poolBlocks, heldUnder(ix, resumeID, poolModel, 0), "the base model's blocks in the snapshot")
	require.Equal(t, poolBlocks, heldUnder(ix, resumeID, "beta", 0), "the other model's blocks in the snapshot, under it")

	last := uint64(1000 + poolBlocks - 1) // poolBatch(0)'s last engine hash
	send(beta, wire.AppendBatch(nil, &wire.Batch{Events: []wire.Event{{Type: wire.EventBlockRemoved,
		BlockHashes: []uint64{last}, Medium: "GPU", HasGroup: true}}, HasDPRank: true}, wire.FormatVLLM)) // while the router is down
	send(nil, poolPayload(1))
	p2, reg := start(ix, 3)
	defer p2.Close()
	require.Equal(t, 1.0, resumes(t, reg, ResumeOK))
	require.Equal(t, poolBlocks-1, heldUnder(ix, resumeID, "beta", 0), "beta's removal found its restored block")
	require.Equal(t, poolBlocks, heldUnder(ix, resumeID, poolModel, 0))
	require.Equal(t, poolBlocks, heldUnder(ix, resumeID, poolModel, 1))
}
