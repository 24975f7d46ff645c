package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// buffer_steps and hwm size what the publisher allocates (the replay ring
// up front, each subscriber's queue when it connects): a value past the
// bound is refused by --kv-events-config's own key, where the flag is
// read, instead of by the publisher's name for it when the engine starts.
func TestKVEventsConfigBoundsSizes(t *testing.T) {
	for _, c := range []struct {
		doc, err string
	}{
		{`{"enable_kv_cache_events":true,"buffer_steps":4194304,"hwm":1048576}`, ""},
		{`{"enable_kv_cache_events":true,"buffer_steps":4194305}`, "buffer_steps 4194305 > 4194304"},
		{`{"enable_kv_cache_events":true,"buffer_steps":9223372036854775807}`, "buffer_steps 9223372036854775807 > 4194304"},
		{`{"enable_kv_cache_events":true,"hwm":1048577}`, "hwm 1048577 > 1048576"},
		{`{"enable_kv_cache_events":true,"hwm":100000000000}`, "hwm 100000000000 > 1048576"},
	} {
		_, err := ParseKVEventsConfig(c.doc)
		if c.err == "" {
			require.NoError(t, err, c.doc)
			continue
		}
		require.ErrorIs(t, err, ErrBadKVEventsConfig, c.doc)
		require.ErrorContains(t, err, c.err, c.doc)
	}
}
