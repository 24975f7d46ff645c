package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/simengine"
)

// indexFrom applies payloads, in order, to a fresh index as endpoint "e".
func indexFrom(t *testing.T, blockSize int, payloads [][]byte) *kvindex.Index {
	t.Helper()
	ix, err := kvindex.New(kvindex.Config{BlockSize: blockSize, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	ap, err := kvevents.NewApplier(kvevents.ApplierConfig{Model: "m"}, ix, kvevents.Options{})
	require.NoError(t, err)
	dec := wire.NewDecoder(wire.Limits{})
	for _, p := range payloads {
		var b wire.Batch
		require.NoError(t, dec.Decode(p, &b))
		r := ap.Apply("e", "m", &b)
		require.Zero(t, r.Dropped, "nothing of the stream or the snapshot is dropped")
	}
	return ix
}

// The simulated engine's snapshot, applied to an empty index, rebuilds
// exactly what the engine's whole event stream (replayed from 0) builds,
// through evictions, and it
// reports the last published sequence and a 16-byte publisher identity.
func TestSnapshotRebuildsWhatTheStreamBuilds(t *testing.T) {
	defer leakcheck.Check(t)()
	kv, err := ParseKVEventsConfig(`{"enable_kv_cache_events":true,"endpoint":"tcp://127.0.0.1:0","replay_endpoint":"tcp://127.0.0.1:0","snapshot_endpoint":"tcp://127.0.0.1:0"}`)
	require.NoError(t, err)
	cfg := Config{EnableScaleOut: true, KVEvents: kv, Engine: fastEngine()}
	cfg.Engine.NumGPUBlocks = 10
	s, base := startServer(t, cfg)
	bs := s.Engine().BlockSize()
	for i := range 16 {
		prompt := make([]int, 0, 5*bs)
		for j := range (2 + i%4) * bs {
			prompt = append(prompt, (i%5)*1000+j+(j/(2*bs))*i+1) // shared and diverging prefixes
		}
		code, out := post(t, base+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1})
		require.Equal(t, http.StatusOK, code, string(out))
	}
	published := s.Publisher().Stats().Published
	require.Positive(t, published)

	c, err := snapshot.NewClient(snapshot.ClientConfig{}, snapshot.Options{})
	require.NoError(t, err)
	r, err := c.Fetch(context.Background(), s.SnapshotEndpoint())
	require.NoError(t, err)
	require.Equal(t, int64(published-1), r.Seq, "consistent with the last published batch")
	require.NotEqual(t, [16]byte{}, r.PublisherID)

	var stream [][]byte
	rc := replayAll(t, s.ReplayEndpoint()) // decoded events, re-encoded one batch each
	removed := 0
	for _, e := range rc {
		if e.Type == wire.EventBlockRemoved {
			removed++
		}
		b := wire.Batch{TS: 1, Events: []wire.Event{e}, HasDPRank: true}
		stream = append(stream, wire.AppendBatch(nil, &b, wire.FormatVLLM))
	}
	require.Positive(t, removed, "the engine evicted blocks")
	want := indexFrom(t, bs, stream)
	got := indexFrom(t, bs, r.Chunks)
	require.Equal(t, want.EndpointBlocks("e"), got.EndpointBlocks("e"))
	require.Equal(t, want.Stats().Blocks, got.Stats().Blocks)
	require.Positive(t, got.EndpointBlocks("e"))
	require.NoError(t, s.Close())
}

// With SnapshotUnavailableFor the socket answers "unavailable, retry
// later" until that time has passed, then serves.
func TestSnapshotUnavailableForAWhile(t *testing.T) {
	defer leakcheck.Check(t)()
	kv, err := ParseKVEventsConfig(`{"enable_kv_cache_events":true,"endpoint":"tcp://127.0.0.1:0","snapshot_endpoint":"tcp://127.0.0.1:0"}`)
	require.NoError(t, err)
	s, _ := startServer(t, Config{KVEvents: kv, Engine: fastEngine(), SnapshotUnavailableFor: 300 * time.Millisecond})
	var ops []string
	c, err := snapshot.NewClient(snapshot.ClientConfig{Backoff: 50 * time.Millisecond,
		OnAttemptError: func(e *snapshot.Error) { ops = append(ops, e.Op) }}, snapshot.Options{})
	require.NoError(t, err)
	r, err := c.Fetch(context.Background(), s.SnapshotEndpoint())
	require.NoError(t, err)
	require.Equal(t, snapshot.SeqEmpty, r.Seq, "nothing published yet")
	require.NotEmpty(t, ops, "answered unavailable first")
	for _, op := range ops {
		require.Equal(t, snapshot.OpUnavailable, op)
	}
	require.Equal(t, uint64(len(ops)), s.Publisher().SnapshotStats().Unavailable, fmt.Sprint(ops))
	require.NoError(t, s.Close())
}

// residency folds events into what they leave resident: for each
// (group_idx, hash) the stores not yet taken back by a removal of that
// group (an engine may hold several blocks of one hash), with the spec
// kind and window its last store named.
func residency(t *testing.T, events []wire.Event) map[[2]uint64]string {
	t.Helper()
	count := map[[2]uint64]int{}
	kind := map[[2]uint64]string{}
	for _, e := range events {
		switch e.Type {
		case wire.EventBlockStored:
			for _, h := range e.BlockHashes {
				k := [2]uint64{uint64(e.Group), h}
				count[k]++
				kind[k] = fmt.Sprintf("%s/%d/%v", e.Kind, e.SlidingWindow, e.HasSlidingWindow)
			}
		case wire.EventBlockRemoved:
			for _, h := range e.BlockHashes {
				k := [2]uint64{uint64(e.Group), h}
				if count[k]--; count[k] <= 0 {
					delete(count, k)
				}
			}
		case wire.EventAllBlocksCleared:
			clear(count)
		}
	}
	live := map[[2]uint64]string{}
	for k, n := range count {
		live[k] = fmt.Sprintf("%s x%d", kind[k], n)
	}
	return live
}

// A hybrid engine's snapshot leaves resident, group by group, what its
// stream leaves resident: the sliding-window and Mamba groups evict on
// their own, and one group's removal of a hash is not the others', in
// every numbering of the groups (full attention need not be group 0).
func TestSnapshotKeepsEachGroupOfAHybridEngine(t *testing.T) {
	for _, order := range []string{simengine.OrderFullFirst, simengine.OrderWindowFirst, simengine.OrderMambaFirst} {
		t.Run(order, func(t *testing.T) { testSnapshotKeepsEachGroup(t, order) })
	}
}

func testSnapshotKeepsEachGroup(t *testing.T, order string) {
	defer leakcheck.Check(t)()
	kv, err := ParseKVEventsConfig(`{"enable_kv_cache_events":true,"endpoint":"tcp://127.0.0.1:0","replay_endpoint":"tcp://127.0.0.1:0","snapshot_endpoint":"tcp://127.0.0.1:0"}`)
	require.NoError(t, err)
	cfg := Config{EnableScaleOut: true, KVEvents: kv, Engine: fastEngine()}
	cfg.Engine.NumGPUBlocks = 24
	cfg.Engine.Hybrid = &simengine.HybridConfig{SlidingWindow: 6, Mamba: true, GroupOrder: order}
	s, base := startServer(t, cfg)
	bs := s.Engine().BlockSize()
	for i := range 12 {
		prompt := make([]int, 0, 5*bs)
		for j := range (2 + i%4) * bs {
			prompt = append(prompt, (i%3)*1000+j+(j/(2*bs))*i+1) // shared and diverging prefixes
		}
		code, out := post(t, base+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1})
		require.Equal(t, http.StatusOK, code, string(out))
	}
	c, err := snapshot.NewClient(snapshot.ClientConfig{}, snapshot.Options{})
	require.NoError(t, err)
	r, err := c.Fetch(context.Background(), s.SnapshotEndpoint())
	require.NoError(t, err)
	require.Equal(t, int64(s.Publisher().Stats().Published-1), r.Seq)

	stream := replayAll(t, s.ReplayEndpoint())
	dec := wire.NewDecoder(wire.Limits{})
	var snap []wire.Event
	for _, p := range r.Chunks {
		var b wire.Batch
		require.NoError(t, dec.Decode(p, &b))
		for _, e := range b.Events {
			e.BlockHashes = append([]uint64(nil), e.BlockHashes...)
			snap = append(snap, e)
		}
	}
	want, got := residency(t, stream), residency(t, snap)
	groups := map[uint64]int{}
	for k := range want {
		groups[k[0]]++
	}
	require.Len(t, groups, 3, "every group holds blocks: %v", groups)
	require.Equal(t, want, got)

	// The router's index agrees too.
	var streamPayloads [][]byte
	for _, e := range stream {
		b := wire.Batch{TS: 1, Events: []wire.Event{e}, HasDPRank: true}
		streamPayloads = append(streamPayloads, wire.AppendBatch(nil, &b, wire.FormatVLLM))
	}
	wantIx, gotIx := indexFrom(t, bs, streamPayloads), indexFrom(t, bs, r.Chunks)
	require.Equal(t, wantIx.EndpointBlocks("e"), gotIx.EndpointBlocks("e"))
	require.NoError(t, s.Close())
}
