package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

func TestRecordRoundTrip(t *testing.T) {
	loads := []EndpointLoad{{Endpoint: "10.0.0.1:8000", Tokens: 4096, Requests: 3}, {Endpoint: "10.0.0.2:8000", Requests: 1}}
	b := encodeRecord(nil, "http://10.1.0.5:9090/snapshot", 1_700_000_000_123, 42, loads, nil)
	rec, err := decodeRecord(b, 16)
	require.NoError(t, err)
	require.Equal(t, Record{SnapshotURL: "http://10.1.0.5:9090/snapshot", SentMs: 1_700_000_000_123, Seq: 42, Loads: loads}, rec)

	_, err = decodeRecord(b, 1)
	require.ErrorIs(t, err, errMalformed, "more endpoints than the cap")
	_, err = decodeRecord(b[:len(b)-1], 16)
	require.ErrorIs(t, err, errMalformed, "truncated")
	_, err = decodeRecord(append(b, 0), 16)
	require.ErrorIs(t, err, errMalformed, "trailing byte")
	_, err = decodeRecord([]byte{'D', 1}, 16)
	require.ErrorIs(t, err, errMalformed, "wrong magic")
}

// A record carries the admission queue depths after the loads; a record
// without any is what it was before queue depths were shared, and what a
// decoder accepts is bounded.
func TestRecordQueuesRoundTripAndBounds(t *testing.T) {
	loads := []EndpointLoad{{Endpoint: "10.0.0.1:8000", Tokens: 4096, Requests: 3}}
	queues := []QueueDepth{{Priority: 1, Requests: 7}, {Priority: -1, Requests: 300}}
	plain := encodeRecord(nil, "", 5, 6, loads, nil)
	b := encodeRecord(nil, "", 5, 6, loads, queues)
	require.Equal(t, plain, b[:len(plain)], "the queues are a section after the loads")
	rec, err := decodeRecord(b, 16)
	require.NoError(t, err)
	require.Equal(t, queues, rec.Queues)

	bad := func(qs ...QueueDepth) []byte { return encodeRecord(nil, "", 5, 6, loads, qs) }
	for name, data := range map[string][]byte{
		"priority twice":     bad(QueueDepth{Priority: 1, Requests: 1}, QueueDepth{Priority: 1, Requests: 2}),
		"depth out of range": bad(QueueDepth{Priority: 1, Requests: maxQueueRequests + 1}),
		"priority too large": bad(QueueDepth{Priority: maxQueuePriority + 1, Requests: 1}),
		"too many bands":     bad(make([]QueueDepth, maxQueueBands+1)...),
		"truncated":          b[:len(b)-1],
		"trailing byte":      append(b[:len(b):len(b)], 0),
	} {
		_, err := decodeRecord(data, 16)
		require.ErrorIs(t, err, errMalformed, name)
	}
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
	}, nil)
	require.NoError(t, err)
	require.Equal(t, []got{{"replica-a", "10.0.0.1:8000", keys}, {"replica-a", "10.0.0.2:8000", keys[:3]}}, out)

	_, err = decodeDecisions(b, 16, nil, func(_, _ []byte, _ []kvindex.Key) {}, nil)
	require.ErrorIs(t, err, errMalformed, "more keys than the cap")
	_, err = decodeDecisions(b[:len(b)-3], 64, nil, func(_, _ []byte, _ []kvindex.Key) {}, nil)
	require.ErrorIs(t, err, errMalformed, "truncated")
	huge := appendDecisionHeader(nil, "x", 1<<40)
	_, err = decodeDecisions(huge, 64, nil, func(_, _ []byte, _ []kvindex.Key) {}, nil)
	require.ErrorIs(t, err, errMalformed, "a count larger than the message")
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(nil, "http://a/snapshot", 1, 7, []EndpointLoad{{Endpoint: "e:1", Tokens: 5, Requests: 1}}, nil))
	f.Add(encodeRecord(nil, "", 0, 0, nil, nil))
	f.Add(encodeRecord(nil, "", 3, 9, []EndpointLoad{{Endpoint: "e:1", Requests: 1}}, []QueueDepth{{Priority: 1, Requests: 4}, {Priority: -1, Requests: 2}}))
	f.Add([]byte{'R', 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := decodeRecord(data, 64)
		if err != nil {
			return
		}
		again, err := decodeRecord(encodeRecord(nil, rec.SnapshotURL, rec.SentMs, rec.Seq, rec.Loads, rec.Queues), 64)
		require.NoError(t, err)
		require.Equal(t, rec, again)
	})
}

func FuzzDecodeDecisions(f *testing.F) {
	b := appendDecisionHeader(nil, "r1", 1)
	f.Add(appendDecision(b, "10.0.0.1:8000", []kvindex.Key{1, 2, 3}))
	f.Add(appendDecisionHeader(nil, "r1", 0))
	f.Add([]byte{'D', 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(appendDeltas(appendDecision(appendDecisionHeader(nil, "r1", 1), "e:1", []kvindex.Key{4}), 1<<50, []delta{{endpoint: "e:1", tokens: 300, requests: 1}, {endpoint: "e:2", tokens: -70, requests: -1}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		_, _ = decodeDecisions(data, 1024, nil, func(_, ep []byte, keys []kvindex.Key) {
			require.NotEmpty(t, ep)
			require.LessOrEqual(t, len(keys), 1024)
			n += 8 * len(keys)
		}, func(_, ep []byte, _ uint64, tok, req int64) {
			require.NotEmpty(t, ep)
			require.LessOrEqual(t, max(tok, -tok), int64(1)<<62)
			require.LessOrEqual(t, max(req, -req), int64(1)<<62)
			n += len(ep) + 3
		})
		require.LessOrEqual(t, n, len(data), "keys and changes decoded from bytes the message holds")
	})
}

func TestDecisionQueueBoundedAndReused(t *testing.T) {
	var q decisionQueue
	q.init(2, 3)
	keys := []kvindex.Key{1, 2, 3}
	require.True(t, q.push("a", keys))
	require.True(t, q.push("b", keys[:1]))
	require.False(t, q.push("c", keys), "full")
	var dq deltaQueue
	got, _ := q.take(&dq)
	require.Len(t, got, 2)
	require.Equal(t, "a", got[0].endpoint)
	require.Equal(t, keys, got[0].keys)
	keys[0] = 99
	require.Equal(t, kvindex.Key(1), got[0].keys[0], "push copies the keys")
	require.True(t, q.push("c", keys))
	require.Zero(t, testing.AllocsPerRun(100, func() {
		q.push("d", keys)
		q.take(&dq)
	}), "a warm queue does not allocate")
	q.close()
	require.False(t, q.push("e", keys), "closed")
}

// Publish, on Pick's path, copies into the preallocated queue or drops:
// never an allocation.
func TestPublishDoesNotAllocate(t *testing.T) {
	cfg := Config{Addrs: []string{"127.0.0.1:1"}, DecisionQueue: 4}.WithDefaults()
	met, err := newMetrics(telemetry.Set{})
	require.NoError(t, err)
	r := &Replica{cfg: cfg, met: met}
	r.q.init(cfg.DecisionQueue, cfg.MaxKeysPerDecision)
	keys := make([]kvindex.Key, 600) // over MaxKeysPerDecision: truncated
	i := 0
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		r.Publish("10.0.0.1:8000", keys)
		if i++; i%7 == 0 {
			r.q.take(&r.dq)
		}
	}))
	require.Positive(t, r.stats.dropped.Load(), "a full queue drops")
	r.q.take(&r.dq)
	r.Publish("10.0.0.1:8000", keys)
	got, _ := r.q.take(&r.dq)
	require.NotEmpty(t, got)
	require.Len(t, got[0].keys, cfg.MaxKeysPerDecision)
	var nilReplica *Replica
	nilReplica.Publish("x", keys) // a Router without a cluster
}

// Version 2 carries a record's sequence number and a message's load changes;
// version-1 records and messages (from replicas not yet upgraded) still
// decode, without either.
func TestCodecVersions(t *testing.T) {
	rec, err := decodeRecord(encodeRecord(nil, "u", 5, 1<<52, []EndpointLoad{{Endpoint: "e:1", Tokens: 9, Requests: 2}}, nil), 8)
	require.NoError(t, err)
	require.Equal(t, uint64(1<<52), rec.Seq)
	v1 := []byte{'R', 1, 1, 'u', 5, 1, 3, 'e', ':', '1', 9, 2}
	rec, err = decodeRecord(v1, 8)
	require.NoError(t, err)
	require.Equal(t, Record{SnapshotURL: "u", SentMs: 5, Loads: []EndpointLoad{{Endpoint: "e:1", Tokens: 9, Requests: 2}}}, rec)
	_, err = decodeRecord([]byte{'R', 3, 0, 0, 0}, 8)
	require.ErrorIs(t, err, errMalformed, "a future version is refused, not misread")

	type change struct {
		ep       string
		seq      uint64
		tok, req int64
	}
	var got []change
	var decisions int
	onDelta := func(s, ep []byte, seq uint64, tok, req int64) {
		require.Equal(t, "r1", string(s))
		got = append(got, change{string(ep), seq, tok, req})
	}
	msg := appendDecision(appendDecisionHeader(nil, "r1", 1), "e:1", []kvindex.Key{4})
	before := len(msg)
	msg = appendDeltas(msg, 1000, []delta{{endpoint: "e:1", tokens: 300, requests: 1}, {endpoint: "e:2", tokens: -70, requests: -1}})
	_, err = decodeDecisions(msg, 8, nil, func(_, _ []byte, _ []kvindex.Key) { decisions++ }, onDelta)
	require.NoError(t, err)
	require.Equal(t, 1, decisions)
	require.Equal(t, []change{{"e:1", 1000, 300, 1}, {"e:2", 1001, -70, -1}}, got)
	require.Equal(t, 2+1+2*(1+3+2+1), len(msg)-before, "first seq, count, then endpoint, tokens, requests per change")

	got, decisions = nil, 0
	v1msg := append([]byte{'D', 1}, msg[2:before]...)
	_, err = decodeDecisions(v1msg, 8, nil, func(_, _ []byte, _ []kvindex.Key) { decisions++ }, onDelta)
	require.NoError(t, err)
	require.Equal(t, 1, decisions)
	require.Empty(t, got)
	_, err = decodeDecisions(append([]byte{'D', 1}, msg[2:]...), 8, nil, func(_, _ []byte, _ []kvindex.Key) {}, onDelta)
	require.ErrorIs(t, err, errMalformed, "a version-1 message has no load changes")
	_, err = decodeDecisions(msg[:len(msg)-1], 8, nil, func(_, _ []byte, _ []kvindex.Key) {}, onDelta)
	require.ErrorIs(t, err, errMalformed, "truncated change")
}
