package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
)

// A session's turns stick to the endpoint of its first turn even when no
// turn shares a block with another (nothing in the index says where the
// session is), while requests without a session spread over the fleet.
func TestTurnsStickWithoutCacheSignal(t *testing.T) {
	f := newFixture(t, session.Config{}, 4)
	first := f.pick(t, header("X-Session-Id", "conv-1"), prompt(1, 256))
	first.Done(kvroute.DoneInfo{})
	for turn := 2; turn <= 20; turn++ {
		d := f.pick(t, header("X-Session-Id", "conv-1"), prompt(turn, 256))
		require.Equal(t, first.Endpoint.ID, d.Endpoint.ID, "turn %d", turn)
		d.Done(kvroute.DoneInfo{})
	}
	require.Equal(t, 19.0, f.counter(t, "kvroute_session_lookups_total", "outcome", "hit"))
	require.Equal(t, 1.0, f.counter(t, "kvroute_session_lookups_total", "outcome", "miss"))

	spread := map[string]bool{}
	for i := 100; i < 140; i++ {
		d := f.pick(t, nil, prompt(i, 256))
		spread[d.Endpoint.ID] = true
		d.Done(kvroute.DoneInfo{})
	}
	require.Greater(t, len(spread), 1, "without a session the tie-break spreads requests")
	require.Equal(t, 40.0, f.counter(t, "kvroute_session_keys_total", "source", "none"))
}

// The session's endpoint is left when it is saturated: its session score
// falls to 0 and the load decides.
func TestSaturatedEndpointIsLeft(t *testing.T) {
	f := newFixture(t, session.Config{SaturationTokens: 10_000}, 2)
	h := header("X-Session-Id", "agent-7")
	d := f.pick(t, h, prompt(1, 512))
	home := d.Endpoint.ID
	d.Done(kvroute.DoneInfo{})

	// Another client's long prompts in flight on the session's endpoint.
	busy := f.r.Load().Dispatch(home, 9_800)
	d = f.pick(t, h, prompt(2, 512))
	require.NotEqual(t, home, d.Endpoint.ID, "a saturated endpoint keeps no session")
	require.Equal(t, 1.0, f.counter(t, "kvroute_session_lookups_total", "outcome", "moved"))
	d.Done(kvroute.DoneInfo{})
	busy.Done()

	// Moderately loaded: the session's endpoint still wins over an idle one.
	moved := d.Endpoint.ID
	load := f.r.Load().Dispatch(moved, 3_000)
	defer load.Done()
	d = f.pick(t, h, prompt(3, 512))
	require.Equal(t, moved, d.Endpoint.ID, "a loaded but not saturated endpoint keeps its session")
	d.Done(kvroute.DoneInfo{})
}

// Entries expire TTL after the session's last turn, on the injected clock.
func TestSessionExpires(t *testing.T) {
	f := newFixture(t, session.Config{TTL: time.Minute}, 4)
	d := f.pick(t, header("X-Session-Id", "s"), prompt(1, 128))
	d.Done(kvroute.DoneInfo{})
	_, ok := f.a.Endpoint("s")
	require.True(t, ok)
	f.clk.Advance(59 * time.Second)
	_, ok = f.a.Endpoint("s")
	require.True(t, ok, "within the TTL")
	f.clk.Advance(2 * time.Second)
	_, ok = f.a.Endpoint("s")
	require.False(t, ok, "past the TTL")
	d = f.pick(t, header("X-Session-Id", "s"), prompt(2, 128))
	d.Done(kvroute.DoneInfo{})
	require.Equal(t, 1.0, f.counter(t, "kvroute_session_lookups_total", "outcome", "expired"))
	// The lookup that found it expired removed it: counted as removed past
	// its TTL, as the sweep a new session makes counts the ones it removes.
	require.Equal(t, 1.0, f.counter(t, "kvroute_session_expired_total", "", ""))
}

// The store holds at most MaxEntries sessions; the least recently routed
// are forgotten first and counted.
func TestStoreBoundEvictsOldest(t *testing.T) {
	a, err := session.New(session.Config{MaxEntries: 16 * 4}, session.Options{}) // one shard
	require.NoError(t, err)
	defer a.Close()
	for i := range 1000 {
		a.Record(strings.Repeat("k", 1+i%7)+string(rune('a'+i%26))+itoa(i), "ep")
	}
	require.LessOrEqual(t, a.Len(), 64)
	// The latest sessions are still there.
	_, ok := a.Endpoint("k" + "a" + itoa(0))
	require.False(t, ok, "the oldest is gone")
	last := 999
	_, ok = a.Endpoint(strings.Repeat("k", 1+last%7) + string(rune('a'+last%26)) + itoa(last))
	require.True(t, ok, "the newest stays")
}

// The store never holds more than MaxEntries sessions, below the shard
// count too, and its shards' shares add up to MaxEntries: many more
// sessions than the bound fill it exactly.
func TestStoreHoldsExactlyMaxEntries(t *testing.T) {
	for _, maxEntries := range []int{1, 5, 15, 17, 1000, 2049, 16*1024 + 7} {
		a, err := session.New(session.Config{MaxEntries: maxEntries}, session.Options{})
		require.NoError(t, err)
		for i := range 4 * maxEntries {
			a.Record("sess-"+itoa(i), "10.0.0.1:8000")
			require.LessOrEqual(t, a.Len(), maxEntries, "MaxEntries=%d after %d sessions", maxEntries, i+1)
		}
		require.Equal(t, maxEntries, a.Len(), "MaxEntries=%d", maxEntries)
		a.Close()
	}
}

// keyInShard returns the n-th key whose hash lands in shard sh of a store
// of 16 shards (chosen by Hash(key)&15).
func keyInShard(sh uint64, n int) string {
	for i, found := 0, 0; ; i++ {
		k := "sess-" + itoa(i)
		if session.Hash(k)&15 == sh {
			if found == n {
				return k
			}
			found++
		}
	}
}

// A store below 2,048 entries is one shard: no session is forgotten
// before the store is full, however the keys would spread over 16 shards,
// and the one forgotten is the least recently routed overall.
func TestSmallStoreForgetsLeastRecentlyRoutedOverall(t *testing.T) {
	a, err := session.New(session.Config{MaxEntries: 32}, session.Options{})
	require.NoError(t, err)
	defer a.Close()
	oldest := keyInShard(1, 0)
	a.Record(oldest, "10.0.0.1:8000")
	kept := []string{keyInShard(0, 0), keyInShard(0, 1), keyInShard(0, 2)}
	for _, k := range kept {
		a.Record(k, "10.0.0.1:8000")
	}
	for _, k := range append(kept, oldest) {
		_, ok := a.Endpoint(k)
		require.True(t, ok, "%s forgotten with %d of MaxEntries=32 held", k, a.Len())
	}
	for i := range 29 { // the 33rd session forgets the oldest
		a.Record(keyInShard(2, i), "10.0.0.1:8000")
	}
	require.Equal(t, 32, a.Len())
	_, ok := a.Endpoint(oldest)
	require.False(t, ok, "the least recently routed session is forgotten first")
	for _, k := range kept {
		_, ok := a.Endpoint(k)
		require.True(t, ok, "%s forgotten before the least recently routed session", k)
	}
}

func itoa(i int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
		if i == 0 {
			return string(b)
		}
	}
}

// Malformed header values are skipped and counted, or refused with Strict.
func TestMalformedKeys(t *testing.T) {
	f := newFixture(t, session.Config{}, 2)
	for _, v := range []string{strings.Repeat("x", 300), "has space", "tab\tkey", "ünïcode", ""} {
		d := f.pick(t, header("X-Session-Id", v), prompt(1, 64))
		d.Done(kvroute.DoneInfo{})
	}
	require.Equal(t, 5.0, f.counter(t, "kvroute_session_keys_total", "source", "invalid"))
	require.Equal(t, 0, f.a.Len(), "nothing stored for malformed keys")

	// A malformed header does not hide a good one later in the list.
	d := f.pick(t, header("X-Session-Id", "bad key", "X-Dynamo-Session-Id", "good"), prompt(2, 64))
	d.Done(kvroute.DoneInfo{})
	_, ok := f.a.Endpoint("good")
	require.True(t, ok)

	strict := newFixture(t, session.Config{Strict: true}, 2)
	_, err := strict.r.Pick(context.Background(), &kvroute.Request{Header: header("X-Session-Id", strings.Repeat("x", 300)),
		Prompts: []render.Prompt{{TokenIDs: prompt(1, 64)}}}, strict.eps)
	require.True(t, errors.Is(err, session.ErrInvalidKey), "%v", err)
	require.Contains(t, err.Error(), "longer than 256 bytes")
}

func TestKeySources(t *testing.T) {
	a, err := session.New(session.Config{Derive: true}, session.Options{})
	require.NoError(t, err)
	defer a.Close()
	key := func(req *kvroute.Request) string {
		k, err := a.Key(req)
		require.NoError(t, err)
		return k
	}
	require.Equal(t, "s1", key(&kvroute.Request{Header: header("X-Smg-Routing-Key", "s1")}))
	require.Equal(t, "abc", key(&kvroute.Request{Header: header("Cookie", `a=b; llm-d-session="abc"; c=d`)}))
	require.Equal(t, "set", key(&kvroute.Request{Session: "set", Header: header("X-Session-Id", "other")}))

	turn1 := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"plan a trip"}]}`
	turn2 := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"plan a trip"},{"role":"assistant","content":"where?"},{"role":"user","content":"Rome"}]}`
	other := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"write a poem"}]}`
	k1, k2, k3 := key(&kvroute.Request{Body: []byte(turn1)}), key(&kvroute.Request{Body: []byte(turn2)}), key(&kvroute.Request{Body: []byte(other)})
	require.NotEmpty(t, k1)
	require.Equal(t, k1, k2, "every turn repeats the opening")
	require.NotEqual(t, k1, k3)
	require.Empty(t, key(&kvroute.Request{Body: []byte(`{"prompt":"x"}`)}), "no messages: no derived key")
	require.Empty(t, key(&kvroute.Request{Body: []byte(`not json`)}))
	resp := `{"model":"m","instructions":"x","input":[{"role":"user","content":"hi"}]}`
	require.NotEmpty(t, key(&kvroute.Request{Body: []byte(resp)}))
}

func TestConfig(t *testing.T) {
	cfg, err := session.LoadConfig(strings.NewReader(`{"headers":["x-conv"],"ttl":"90s","maxEntries":1000,"weight":2}`))
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, cfg.TTL)
	for doc, want := range map[string]string{
		`{"ttl":30}`:                 "ttl",
		`{"tll":"1s"}`:               "tll",
		`{"headers":["bad header"]}`: "headers[0]",
		`{"weight":-1}`:              "weight",
		`{"maxKeyBytes":10000}`:      "maxKeyBytes",
		`{"maxEntries":68719476736}`: "maxEntries",
	} {
		_, err := session.LoadConfig(strings.NewReader(doc))
		require.ErrorContains(t, err, want, doc)
		require.ErrorIs(t, err, session.ErrInvalidConfig)
	}
	a, err := session.New(session.Config{}, session.Options{})
	require.NoError(t, err)
	defer a.Close()
	require.Equal(t, session.DefaultTTL, a.Config().TTL)
	require.Equal(t, []string{"X-Session-Id", "X-Dynamo-Session-Id", "X-Smg-Routing-Key"}, a.Config().Headers)
}

// A session key the host sets itself (Request.Session) is counted under
// its own source, as every keyed request is, and Key counts it too.
func TestHostSessionKeysCounted(t *testing.T) {
	f := newFixture(t, session.Config{}, 2)
	for i := range 3 {
		d, err := f.r.Pick(context.Background(), &kvroute.Request{Session: "host-pinned",
			Prompts: []render.Prompt{{TokenIDs: prompt(i, 128)}}}, f.eps)
		require.NoError(t, err)
		d.Done(kvroute.DoneInfo{})
	}
	k, err := f.a.Key(&kvroute.Request{Session: "host-pinned"})
	require.NoError(t, err)
	require.Equal(t, "host-pinned", k)
	require.Equal(t, 4.0, f.counter(t, "kvroute_session_keys_total", "source", "host"))
	require.Equal(t, 0.0, f.counter(t, "kvroute_session_keys_total", "source", "none"))
	require.Equal(t, 2.0, f.counter(t, "kvroute_session_lookups_total", "outcome", "hit"))
}
