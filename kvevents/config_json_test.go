package kvevents_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents"
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
