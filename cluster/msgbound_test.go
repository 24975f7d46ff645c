package cluster

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// publisherOnRedis is a manual replica "b" of pool "late" with cfg (over
// manualOnRedis's), publishing through st on the clock *now.
func publisherOnRedis(t *testing.T, st Store, now *time.Time, mutate func(*Config)) (*Replica, *Manual, *tokenload.Tracker) {
	t.Helper()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	tr, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	cfg := Config{Pool: "late", ReplicaID: "b", Lease: time.Hour, RefreshPeriod: time.Minute, ReadPeriod: time.Minute}
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := NewManual(cfg, ix, tr, st, Options{Set: telemetry.Set{Clock: pointerClock{Clock: telemetry.Wall, now: now}}})
	require.NoError(t, err)
	t.Cleanup(m.Replica().Close)
	return m.Replica(), m, tr
}

// messageChanges checks that every message is within the bound its
// receivers check and returns the numbers of the load changes they carry,
// in order, and the number of decisions.
func messageChanges(t *testing.T, msgs [][]byte) (seqs []uint64, decisions int) {
	t.Helper()
	for _, m := range msgs {
		require.LessOrEqual(t, len(m), maxMessageBytes, "a published message is within the bound its receivers check")
		_, err := decodeDecisions(m, maxMessageBytes/8, nil, func(_, _ []byte, _ []kvindex.Key) { decisions++ },
			func(_, _ []byte, seq uint64, _, _ int64) { seqs = append(seqs, seq) })
		require.NoError(t, err)
	}
	return seqs, decisions
}

// A burst of load changes, some naming endpoints of 1,024 bytes, queued
// behind decisions of the most keys Validate allows, travels in several
// messages, each within maxMessageBytes, each numbering its first change
// after the previous message's last: the peer applies every change and
// every decision. Before, flush put every queued change into one message
// whatever its size; over 1 MiB (a burst, or the default DeltaQueue's
// 1,024 changes on long endpoint names) every peer rejected it whole, and
// its changes and decisions were lost.
func TestABurstOfLoadChangesTravelsInMessagesWithinTheBound(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	st := &capturingStore{redisStore: redisStore{rdb: rdb}}
	now := time.Unix(1_800_000_000, 0)
	long := strings.Repeat("e", maxNameBytes-len(":8000")) + ":8000"
	eps := append(testEndpointIDs(), long)
	a, ma, trA := manualOnRedis(t, st, "a", &now)
	a.SetEndpoints(eps)

	const short, shorts, longs = "10.0.0.1:8000", 20_000, 2_000
	b, mb, trB := publisherOnRedis(t, st, &now, func(c *Config) {
		c.DeltaQueue = shorts + longs
		c.MaxKeysPerDecision = maxDecisionKeys("b")
	})
	b.SetEndpoints(eps)
	mb.Refresh()
	ma.Read()

	keys := make([]kvindex.Key, maxDecisionKeys("b"))
	for i := range keys {
		keys[i] = kvindex.Key(i + 1)
	}
	b.Publish(long, keys)
	b.Publish(short, keys)
	for i := 0; i < shorts; i++ {
		trB.Dispatch(short, 700)
		if i%10 == 0 {
			trB.Dispatch(long, 7)
		}
	}
	require.Equal(t, 2+shorts+longs, mb.Flush())
	msgs := st.take()
	require.Greater(t, len(msgs), 3, "the decisions take a message each, the changes several")
	seqs, decisions := messageChanges(t, msgs)
	require.Equal(t, 2, decisions)
	require.Len(t, seqs, shorts+longs)
	for i := 1; i < len(seqs); i++ {
		require.Equal(t, seqs[i-1]+1, seqs[i], "change %d is numbered after the one before it", i)
	}
	for _, m := range msgs {
		ma.Apply(m)
	}
	require.Equal(t, [2]int64{700 * shorts, shorts}, peerLoad(trA, short))
	require.Equal(t, [2]int64{7 * longs, longs}, peerLoad(trA, long))
	require.EqualValues(t, 2, a.Stats().Applied, "both decisions applied")
	require.EqualValues(t, 2, b.Stats().Published)
	require.EqualValues(t, shorts+longs, b.Stats().Deltas)
	require.EqualValues(t, len(msgs), b.Stats().Messages)
}

// A decision or load change larger than a message on its own (an endpoint
// name of 1 MiB, which no peer accepts anyway) is dropped and counted
// (too_large) instead of being published over the bound; the changes
// around it still arrive, numbered as they were queued.
func TestDecisionOrChangeTooLargeForAMessageIsDropped(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	st := &capturingStore{redisStore: redisStore{rdb: rdb}}
	now := time.Unix(1_800_000_000, 0)
	_, ma, trA := manualOnRedis(t, st, "a", &now)
	b, mb, trB := publisherOnRedis(t, st, &now, nil)
	b.SetEndpoints(testEndpointIDs())
	mb.Refresh()
	ma.Read()

	const ep = "10.0.0.1:8000"
	huge := strings.Repeat("h", maxMessageBytes)
	b.Publish(huge, []kvindex.Key{1})
	b.Publish(ep, []kvindex.Key{2})
	trB.Dispatch(ep, 5)
	trB.Dispatch(huge, 5)
	trB.Dispatch(ep, 5)
	require.Equal(t, 5, mb.Flush())
	msgs := st.take()
	seqs, decisions := messageChanges(t, msgs)
	require.Equal(t, 1, decisions)
	require.Len(t, seqs, 2)
	require.Equal(t, seqs[0]+2, seqs[1], "the change after the dropped one keeps its number")
	for _, m := range msgs {
		ma.Apply(m)
	}
	require.Equal(t, [2]int64{10, 2}, peerLoad(trA, ep))
	require.Equal(t, 1.0, testutil.ToFloat64(b.met.dropped[dropTooLarge]))
	require.Equal(t, 1.0, testutil.ToFloat64(b.met.deltasDropped[deltaDropTooLarge]))
	require.EqualValues(t, 1, b.Stats().Dropped)
}

// Validate accepts the most keys a decision can carry and still fit a
// message of its own with an endpoint name of the longest a peer accepts,
// and rejects one more; the sizes flush counts are those the encoder
// writes.
func TestMaxKeysPerDecisionFitsAMessage(t *testing.T) {
	for _, id := range []string{"b", strings.Repeat("r", 200)} {
		most := maxDecisionKeys(id)
		require.Greater(t, most, 130_000)
		cfg := Config{ReplicaID: id, MaxKeysPerDecision: most}.WithDefaults()
		require.NoError(t, cfg.Validate())
		cfg.MaxKeysPerDecision++
		require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig)

		require.GreaterOrEqual(t, messageOverhead(id),
			len(appendDecisionHeader(nil, id, math.MaxInt))+len(appendDeltas(nil, math.MaxUint64, nil))-1+binary.MaxVarintLen64,
			"the overhead counts the largest header and load changes' section")
		require.LessOrEqual(t, messageOverhead(id)+decisionWireBytes(maxNameBytes, most), maxMessageBytes)
		require.Greater(t, messageOverhead(id)+decisionWireBytes(maxNameBytes, most+1), maxMessageBytes)
		msg := appendDecision(appendDecisionHeader(nil, id, 1), strings.Repeat("e", maxNameBytes), make([]kvindex.Key, most))
		require.LessOrEqual(t, len(msg), maxMessageBytes)
	}
	for _, d := range []delta{{endpoint: "e"}, {endpoint: "10.0.0.1:8000", tokens: 700, requests: 1}, {endpoint: strings.Repeat("e", 300), tokens: -1 << 62, requests: -1}} {
		require.Equal(t, len(appendDeltas(nil, 0, []delta{d}))-2, deltaWireBytes(d), "%+v", d)
	}
	for _, k := range []int{0, 1, 127, 128, 16_384} {
		require.Equal(t, len(appendDecision(nil, "10.0.0.1:8000", make([]kvindex.Key, k))), decisionWireBytes(len("10.0.0.1:8000"), k))
	}
}
