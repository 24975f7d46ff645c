package kvevents_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// A pool's configuration decodes strictly on its own: a bare number for a
// duration and an unknown key are errors naming the key, and a duration
// string works.
func TestPoolConfigDecodesStrictly(t *testing.T) {
	var c kvevents.PoolConfig
	require.NoError(t, json.Unmarshal([]byte(`{"idleTimeout":"250ms"}`), &c))
	require.Equal(t, 250*time.Millisecond, c.IdleTimeout)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"idleTimeout":250}`), &c), "idleTimeout: bare number 250 is not a duration")
	require.ErrorContains(t, json.Unmarshal([]byte(`{"idleTimeot":"1s"}`), &c), "idleTimeot: unknown key")
}

// A SnapshotConfig decodes by kvroute's configuration rules on its own, not
// only inside a PoolConfig: a key in another case, a key given twice and an
// unknown key are errors naming the key's path, a duration is a duration
// string, keys not present keep the value they had (inside client too), and
// what Marshal writes decodes back.
func TestSnapshotConfigDecodesStrictly(t *testing.T) {
	defaults := kvevents.SnapshotConfig{Port: 5560, Client: snapshot.ClientConfig{
		AttemptTimeout: snapshot.DefaultAttemptTimeout, Timeout: snapshot.DefaultTimeout, Backoff: snapshot.DefaultBackoff}}
	for _, tc := range []struct {
		name, doc, err string
		want           func(*kvevents.SnapshotConfig)
	}{
		{name: "case variant", doc: `{"Enabled":true}`, err: `Enabled: unknown key (did you mean "enabled"?`},
		{name: "nested case variant", doc: `{"client":{"BackOff":"1s"}}`, err: `client.BackOff: unknown key (did you mean "backoff"?`},
		{name: "repeated key", doc: `{"port":1,"port":2}`, err: "port: key given twice"},
		{name: "unknown key", doc: `{"client":{"timeoutt":"1s"}}`, err: "client.timeoutt: unknown key"},
		{name: "bare number", doc: `{"client":{"backoff":250}}`, err: "client.backoff: bare number 250 is not a duration"},
		{name: "duration string", doc: `{"client":{"backoff":"250ms"}}`,
			want: func(c *kvevents.SnapshotConfig) { c.Client.Backoff = 250 * time.Millisecond }},
		{name: "absent keys keep defaults", doc: `{"enabled":true}`, want: func(c *kvevents.SnapshotConfig) { c.Enabled = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults
			err := json.Unmarshal([]byte(tc.doc), &c)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			want := defaults
			tc.want(&want)
			require.Equal(t, want, c)
		})
	}

	in := kvevents.SnapshotConfig{Enabled: true, Port: 7000, Client: snapshot.ClientConfig{Timeout: 90 * time.Second, MaxBytes: 1 << 20}}
	out, err := json.Marshal(in)
	require.NoError(t, err)
	require.Contains(t, string(out), `"timeout":"1m30s"`)
	var back kvevents.SnapshotConfig
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, in, back)
}

// An ApplierConfig decodes by kvroute's configuration rules on its own: a
// key in another case, a key given twice, an unknown key and a value of the
// wrong kind are errors naming the key, keys not present keep the value
// they had, and what Marshal writes decodes back.
func TestApplierConfigDecodesStrictly(t *testing.T) {
	defaults := kvevents.ApplierConfig{Model: "base", SlidingWindow: 4096}
	for _, tc := range []struct {
		name, doc, err string
		want           kvevents.ApplierConfig
	}{
		{name: "case variant", doc: `{"Model":"m"}`, err: `Model: unknown key (did you mean "model"?`},
		{name: "repeated key", doc: `{"model":"a","model":"b"}`, err: "model: key given twice"},
		{name: "unknown key", doc: `{"loraName":{"1":"a"}}`, err: "loraName: unknown key"},
		{name: "wrong kind", doc: `{"slidingWindow":"250ms"}`, err: "slidingWindow: want a number"},
		{name: "absent keys keep defaults", doc: `{"loraNames":{"3":"adapter"}}`,
			want: kvevents.ApplierConfig{Model: "base", SlidingWindow: 4096, LoRANames: map[int64]string{3: "adapter"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults
			err := json.Unmarshal([]byte(tc.doc), &c)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, c)
		})
	}

	in := kvevents.ApplierConfig{Model: "m", LoRANames: map[int64]string{1: "a", 2: "b"}, MaxResizedBlocksPerEndpoint: 9, SlidingWindow: 128}
	out, err := json.Marshal(in)
	require.NoError(t, err)
	var back kvevents.ApplierConfig
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, in, back)
}
