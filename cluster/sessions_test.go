package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
)

// appendSessions encodes a session message as flushSessions does, for
// tests that write one by hand.
func appendSessions(b []byte, sender string, recs ...sessionRecord) []byte {
	b = appendSessionHeader(b, sender, len(recs))
	for _, r := range recs {
		var age uint64 // the tests put the age in at; zero is 0
		if !r.at.IsZero() {
			age = uint64(r.at.UnixMilli())
		}
		b = appendSessionRecord(b, r.key, r.endpoint, age)
	}
	return b
}

type sessionSink struct {
	mu   sync.Mutex
	recs []sessionRecord
}

func (s *sessionSink) apply(key uint64, ep []byte, age time.Duration) {
	s.mu.Lock()
	s.recs = append(s.recs, sessionRecord{key: key, endpoint: string(ep), at: time.UnixMilli(age.Milliseconds())})
	s.mu.Unlock()
}

func (s *sessionSink) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

// Session records written into the real redis-server by anyone are
// checked: a record naming an endpoint that is not the replica's is
// dropped and counted, a malformed message (truncated, an age over a day,
// trailing bytes) is counted and nothing of it applied, and the replica's
// own records are not applied to itself.
func TestHostileSessionRecords(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	g := newGhost(t, srv.Addr)
	g.record(1, time.Hour)
	x := newHostileTarget(t, srv.Addr)
	var sink sessionSink
	x.r.ShareSessions(sink.apply)
	ctx := context.Background()
	pub := func(msg []byte) { require.NoError(t, g.rdb.Publish(ctx, g.keys.channel, msg).Err()) }

	var recs []sessionRecord
	for i := range 500 {
		recs = append(recs, sessionRecord{key: uint64(i), endpoint: fmt.Sprintf("junk-%d.example:8000", i)})
	}
	recs = append(recs, sessionRecord{key: 7, endpoint: known, at: time.UnixMilli(1500)})
	pub(appendSessions(nil, "ghost", recs...))
	require.Eventually(t, func() bool { return sink.len() >= 1 }, deltaWait, time.Millisecond)
	require.Equal(t, []sessionRecord{{key: 7, endpoint: known, at: time.UnixMilli(1500)}}, sink.recs)
	require.EqualValues(t, 500, counter(t, x.reg, "kvroute_cluster_endpoints_dropped_total", map[string]string{"reason": "unknown_endpoint"}))

	good := appendSessions(nil, "ghost", sessionRecord{key: 8, endpoint: known})
	invalid := counter(t, x.reg, "kvroute_cluster_invalid_messages_total", nil)
	pub(good[:len(good)-3])                                                                                                                 // truncated
	pub(appendSessions(nil, "ghost", sessionRecord{key: 9, endpoint: known, at: time.UnixMilli(int64(48 * time.Hour / time.Millisecond))})) // too old
	pub(append(appendSessions(nil, "ghost", sessionRecord{key: 10, endpoint: known}), 0))                                                   // trailing byte
	pub(appendSessions(nil, "a", sessionRecord{key: 11, endpoint: known}))                                                                  // its own
	pub(good)                                                                                                                               // the marker
	require.Eventually(t, func() bool { return sink.len() >= 2 }, deltaWait, time.Millisecond)
	require.Equal(t, uint64(8), sink.recs[1].key, "nothing of the malformed messages nor of its own was applied")
	require.Equal(t, invalid+3, counter(t, x.reg, "kvroute_cluster_invalid_messages_total", nil))
	x.r.Close()
}

// Records published on one replica reach another's sink: dated by their
// age, within a publish interval and a round trip.
func TestSessionRecordsReachPeers(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	x := newHostileTarget(t, srv.Addr) // replica "a"
	y := newNamedHostileTarget(t, srv.Addr, "b")
	var sink sessionSink
	y.r.ShareSessions(sink.apply)
	x.r.ShareSessions(func(uint64, []byte, time.Duration) {})
	for i := range 100 {
		x.r.PublishSession(uint64(1000+i), known)
	}
	require.Eventually(t, func() bool { return sink.len() == 100 }, deltaWait, time.Millisecond)
	require.Equal(t, uint64(1000), sink.recs[0].key)
	require.Less(t, time.Duration(sink.recs[0].at.UnixMilli())*time.Millisecond, deltaWait, "the age is the time queued")
	// The publisher counts after PUBLISH returns, which may be after the
	// subscriber already applied the message.
	require.Eventually(t, func() bool { return counter(t, x.reg, "kvroute_cluster_sessions_published_total", nil) == 100 }, deltaWait, time.Millisecond)
	require.EqualValues(t, 100, counter(t, y.reg, "kvroute_cluster_sessions_applied_total", nil))
	x.r.Close()
	y.r.Close()
}

// FuzzDecodeSessions: the session message decoder never panics and never
// reports more records than the message can hold; checking a message
// (no callback, as applySessions does first) and decoding it agree, so
// that nothing of a message refused is applied and all of one accepted
// is; and an accepted message, written again by the encoder flushSessions
// uses, decodes to the same sender and records.
func FuzzDecodeSessions(f *testing.F) {
	f.Add(appendSessions(nil, "ghost", sessionRecord{key: 1, endpoint: known}))
	f.Add(appendSessions(nil, "", sessionRecord{key: 1, endpoint: ""}, sessionRecord{key: 2, endpoint: "x"}))
	f.Add([]byte{sessionMagic, sessionWireVersion, 0, 255, 255, 255, 255, 15})
	type rec struct {
		sender, endpoint string
		key              uint64
		age              time.Duration
	}
	decode := func(msg []byte) ([]rec, error) {
		var got []rec
		err := decodeSessions(msg, func(sender, ep []byte, key uint64, age time.Duration) {
			got = append(got, rec{string(sender), string(ep), key, age})
		})
		return got, err
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		got, err := decode(msg)
		for _, r := range got {
			if r.age < 0 || r.age > maxSessionAge || len(r.endpoint) > maxNameBytes || len(r.sender) > maxNameBytes {
				t.Fatalf("record out of bounds: age %v, endpoint %d bytes", r.age, len(r.endpoint))
			}
		}
		if checked := decodeSessions(msg, nil); (checked == nil) != (err == nil) {
			t.Fatalf("checking says %v, decoding %v", checked, err)
		}
		if err != nil {
			return
		}
		if len(got)*10 > len(msg) {
			t.Fatalf("%d records from %d bytes", len(got), len(msg))
		}
		sender := ""
		if len(got) > 0 {
			sender = got[0].sender
		}
		again := appendSessionHeader(nil, sender, len(got))
		for _, r := range got {
			again = appendSessionRecord(again, r.key, r.endpoint, uint64(r.age.Milliseconds()))
		}
		back, err := decode(again)
		require.NoError(t, err, "re-encoded %x", again)
		require.Equal(t, got, back)
	})
}

// A session message reaching a replica that does not share sessions (its
// peers do: their configurations differ) is counted as ignored; a load
// change reaching a replica that routes on local load (degraded) is
// counted as dropped.
func TestMessagesAReplicaCannotUseAreCounted(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	g := newGhost(t, srv.Addr)
	g.record(1, time.Hour)
	x := newHostileTarget(t, srv.Addr) // no ShareSessions
	require.NoError(t, g.rdb.Publish(context.Background(), g.keys.channel,
		appendSessions(nil, "ghost", sessionRecord{key: 7, endpoint: known})).Err())
	require.Eventually(t, func() bool {
		return counter(t, x.reg, "kvroute_cluster_sessions_ignored_total", nil) == 1
	}, deltaWait, time.Millisecond)

	x.r.result(opRead, errors.New("redis slow")) // degraded
	require.True(t, x.r.Degraded())
	x.r.applyDelta([]byte("ghost"), []byte(known), 2, 100, 1)
	require.EqualValues(t, 1, counter(t, x.reg, "kvroute_cluster_load_changes_dropped_total", map[string]string{"reason": "degraded"}))
	require.Equal(t, [2]int64{}, peerLoad(x.tr, known))
	x.r.Close()
}
