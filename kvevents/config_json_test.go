package kvevents_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/jsonconf/conftest"

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
	in := kvevents.SnapshotConfig{Enabled: true, Port: 7000, Client: snapshot.ClientConfig{Timeout: 90 * time.Second, MaxBytes: 1 << 20}}
	require.NoError(t, conftest.Check(defaults, []conftest.Case[kvevents.SnapshotConfig]{
		{Name: "case variant", Doc: `{"Enabled":true}`, Err: `Enabled: unknown key (did you mean "enabled"?`},
		{Name: "nested case variant", Doc: `{"client":{"BackOff":"1s"}}`, Err: `client.BackOff: unknown key (did you mean "backoff"?`},
		{Name: "repeated key", Doc: `{"port":1,"port":2}`, Err: "port: key given twice"},
		{Name: "unknown key", Doc: `{"client":{"timeoutt":"1s"}}`, Err: "client.timeoutt: unknown key"},
		{Name: "bare number", Doc: `{"client":{"backoff":250}}`, Err: "client.backoff: bare number 250 is not a duration"},
		{Name: "duration string", Doc: `{"client":{"backoff":"250ms"}}`,
			Want: func(c *kvevents.SnapshotConfig) { c.Client.Backoff = 250 * time.Millisecond }},
		{Name: "absent keys keep defaults", Doc: `{"enabled":true}`, Want: func(c *kvevents.SnapshotConfig) { c.Enabled = true }},
	}, in, `"timeout":"1m30s"`))
}

// An ApplierConfig decodes by kvroute's configuration rules on its own: a
// key in another case, a key given twice, an unknown key and a value of the
// wrong kind are errors naming the key, keys not present keep the value
// they had, and what Marshal writes decodes back.
func TestApplierConfigDecodesStrictly(t *testing.T) {
	defaults := kvevents.ApplierConfig{Model: "base", SlidingWindow: 4096}
	in := kvevents.ApplierConfig{Model: "m", LoRANames: map[int64]string{1: "a", 2: "b"}, MaxResizedBlocksPerEndpoint: 9, SlidingWindow: 128}
	require.NoError(t, conftest.Check(defaults, []conftest.Case[kvevents.ApplierConfig]{
		{Name: "case variant", Doc: `{"Model":"m"}`, Err: `Model: unknown key (did you mean "model"?`},
		{Name: "repeated key", Doc: `{"model":"a","model":"b"}`, Err: "model: key given twice"},
		{Name: "unknown key", Doc: `{"loraName":{"1":"a"}}`, Err: "loraName: unknown key"},
		{Name: "wrong kind", Doc: `{"slidingWindow":"250ms"}`, Err: "slidingWindow: want a number"},
		{Name: "absent keys keep defaults", Doc: `{"loraNames":{"3":"adapter"}}`,
			Want: func(c *kvevents.ApplierConfig) { c.LoRANames = map[int64]string{3: "adapter"} }},
	}, in))
}
