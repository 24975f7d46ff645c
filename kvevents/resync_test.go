package kvevents

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvindex"
)

// TestPoolResyncRebuildsEndpointFromReplayBuffer: entries the stream never
// published (here: a block stored behind the pool's back, as a stale entry
// would be) are cleared by Resync, and every batch the publisher's buffer
// holds is applied again.
func TestPoolResyncRebuildsEndpointFromReplayBuffer(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel, ReplayAddr: "127.0.0.1:0"})
	defer pub.Close()
	last := publishN(t, pub, 3)
	p, logs := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}))
	waitApplied(t, p, id, last)

	stale := poolTokens(99, poolBlocks)
	require.NoError(t, ix.Store(id, &kvindex.StoreEvent{EngineHashes: []uint64{1, 2}, Tokens: stale,
		BlockSize: poolBlockSize, Model: poolModel, Group: -1}))
	require.Equal(t, poolBlocks, heldBlocks(ix, id, 99))

	require.NoError(t, p.Resync(id))
	waitApplied(t, p, id, last)
	require.Zero(t, heldBlocks(ix, id, 99), "the entry no batch stored is gone")
	requireHeld(t, ix, id, 0, last)
	require.Equal(t, 1, logs.count("Resynchronising the endpoint from its replay buffer"), logs.String())
	require.Equal(t, 2.0, counter(p.metrics().Replays, id, replayComplete), "connect and resync")

	next := publishN(t, pub, 2) // the live stream continues the watermark
	waitApplied(t, p, id, next)
	requireHeld(t, ix, id, 0, next)

	require.ErrorContains(t, p.Resync("nope"), "unknown endpoint")
	require.NoError(t, p.Close())
	require.NoError(t, pub.Close())
}

func TestPoolResyncWithoutReplayAddress(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pub.Close()
	p, _ := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint()}))
	require.ErrorIs(t, p.Resync(id), errNoReplay)
	require.NoError(t, p.Close())
	require.NoError(t, pub.Close())
}
