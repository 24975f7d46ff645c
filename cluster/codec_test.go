package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
)

func TestRecordRoundTrip(t *testing.T) {
	loads := []EndpointLoad{{Endpoint: "10.0.0.1:8000", Tokens: 4096, Requests: 3}, {Endpoint: "10.0.0.2:8000", Requests: 1}}
	b := encodeRecord(nil, "http://10.1.0.5:9090/snapshot", 1_700_000_000_123, loads)
	rec, err := decodeRecord(b, 16)
	require.NoError(t, err)
	require.Equal(t, Record{SnapshotURL: "http://10.1.0.5:9090/snapshot", SentMs: 1_700_000_000_123, Loads: loads}, rec)

	_, err = decodeRecord(b, 1)
	require.ErrorIs(t, err, errMalformed, "more endpoints than the cap")
	_, err = decodeRecord(b[:len(b)-1], 16)
	require.ErrorIs(t, err, errMalformed, "truncated")
	_, err = decodeRecord(append(b, 0), 16)
	require.ErrorIs(t, err, errMalformed, "trailing byte")
	_, err = decodeRecord([]byte{'D', 1}, 16)
	require.ErrorIs(t, err, errMalformed, "wrong magic")
}

func TestDecisionsRoundTripAndSize(t *testing.T) {
	keys := make([]kvindex.Key, 32) // a 2,048-token prompt at block size 64
	for i := range keys {
		keys[i] = kvindex.Key(uint64(i)*0x9e3779b97f4a7c15 + 1)
	}
	b := appendDecisionHeader(nil, "replica-a", 2)
	one := len(b)
	b = appendDecision(b, "10.0.0.1:8000", keys)
	perDecision := len(b) - one
	require.Equal(t, 1+len("10.0.0.1:8000")+1+8*32, perDecision, "endpoint string, key count, 8 bytes a key")
	b = appendDecision(b, "10.0.0.2:8000", keys[:3])

	type got struct {
		sender, ep string
		keys       []kvindex.Key
	}
	var out []got
	_, err := decodeDecisions(b, 64, nil, func(s, ep []byte, k []kvindex.Key) {
		out = append(out, got{string(s), string(ep), append([]kvindex.Key(nil), k...)})
	})
	require.NoError(t, err)
	require.Equal(t, []got{{"replica-a", "10.0.0.1:8000", keys}, {"replica-a", "10.0.0.2:8000", keys[:3]}}, out)

	_, err = decodeDecisions(b, 16, nil, func(_, _ []byte, _ []kvindex.Key) {})
	require.ErrorIs(t, err, errMalformed, "more keys than the cap")
	_, err = decodeDecisions(b[:len(b)-3], 64, nil, func(_, _ []byte, _ []kvindex.Key) {})
	require.ErrorIs(t, err, errMalformed, "truncated")
	huge := appendDecisionHeader(nil, "x", 1<<40)
	_, err = decodeDecisions(huge, 64, nil, func(_, _ []byte, _ []kvindex.Key) {})
	require.ErrorIs(t, err, errMalformed, "a count larger than the message")
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(nil, "http://a/snapshot", 1, []EndpointLoad{{Endpoint: "e:1", Tokens: 5, Requests: 1}}))
	f.Add(encodeRecord(nil, "", 0, nil))
	f.Add([]byte{'R', 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := decodeRecord(data, 64)
		if err != nil {
			return
		}
		again, err := decodeRecord(encodeRecord(nil, rec.SnapshotURL, rec.SentMs, rec.Loads), 64)
		require.NoError(t, err)
		require.Equal(t, rec, again)
	})
}

func FuzzDecodeDecisions(f *testing.F) {
	b := appendDecisionHeader(nil, "r1", 1)
	f.Add(appendDecision(b, "10.0.0.1:8000", []kvindex.Key{1, 2, 3}))
	f.Add(appendDecisionHeader(nil, "r1", 0))
	f.Add([]byte{'D', 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		_, _ = decodeDecisions(data, 1024, nil, func(_, ep []byte, keys []kvindex.Key) {
			require.NotEmpty(t, ep)
			require.LessOrEqual(t, len(keys), 1024)
			n += 8 * len(keys)
		})
		require.LessOrEqual(t, n, len(data), "keys decoded from bytes the message holds")
	})
}

func TestDecisionQueueBoundedAndReused(t *testing.T) {
	var q decisionQueue
	q.init(2, 3)
	keys := []kvindex.Key{1, 2, 3}
	require.True(t, q.push("a", keys))
	require.True(t, q.push("b", keys[:1]))
	require.False(t, q.push("c", keys), "full")
	got := q.take()
	require.Len(t, got, 2)
	require.Equal(t, "a", got[0].endpoint)
	require.Equal(t, keys, got[0].keys)
	keys[0] = 99
	require.Equal(t, kvindex.Key(1), got[0].keys[0], "push copies the keys")
	require.True(t, q.push("c", keys))
	require.Zero(t, testing.AllocsPerRun(100, func() {
		q.push("d", keys)
		q.take()
	}), "a warm queue does not allocate")
	q.close()
	require.False(t, q.push("e", keys), "closed")
}

// Publish, on Pick's path, copies into the preallocated queue or drops:
// never an allocation.
func TestPublishDoesNotAllocate(t *testing.T) {
	cfg := Config{Addrs: []string{"127.0.0.1:1"}, DecisionQueue: 4}.WithDefaults()
	met, err := newMetrics(nil)
	require.NoError(t, err)
	r := &Replica{cfg: cfg, met: met}
	r.q.init(cfg.DecisionQueue, cfg.MaxKeysPerDecision)
	keys := make([]kvindex.Key, 600) // over MaxKeysPerDecision: truncated
	i := 0
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		r.Publish("10.0.0.1:8000", keys)
		if i++; i%7 == 0 {
			r.q.take()
		}
	}))
	require.Positive(t, r.stats.dropped.Load(), "a full queue drops")
	r.q.take()
	r.Publish("10.0.0.1:8000", keys)
	got := r.q.take()
	require.NotEmpty(t, got)
	require.Len(t, got[0].keys, cfg.MaxKeysPerDecision)
	var nilReplica *Replica
	nilReplica.Publish("x", keys) // a Router without a cluster
}
