package tokenload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A nil Handle filed under an ID would panic in its Done or Endpoint once
// the table drops it (expired, evicted), possibly on the expiry timer's
// goroutine, and a nil *Inflight holds no request: Register refuses both
// with ErrNilHandle, counted as invalid, and the table stays usable.
func TestRequestTableRefusesANilHandle(t *testing.T) {
	f := newTableFixture(t, RequestTableConfig{MaxRequests: 2, TTL: time.Minute})
	require.ErrorIs(t, f.tab.Register("nil-interface", nil), ErrNilHandle)
	require.ErrorIs(t, f.tab.Register("nil-inflight", (*Inflight)(nil)), ErrNilHandle)
	require.Zero(t, f.tab.Len())
	require.Equal(t, 2.0, f.count(t, IDInvalid))
	require.Zero(t, f.count(t, IDRegistered))

	f.dispatch(t, "a", "ep", 10)
	f.dispatch(t, "b", "ep", 20)
	f.dispatch(t, "c", "ep", 30) // evicts a
	f.clock.Add(time.Minute)
	f.dispatch(t, "d", "ep", 40) // expires b and c
	requireLoad(t, f.tr, "ep", 40, 1)
	require.Equal(t, 1.0, f.count(t, IDEvicted))
	require.Equal(t, 2.0, f.count(t, IDExpired))
	require.True(t, f.tab.Done("d"))
	requireLoad(t, f.tr, "ep", 0, 0)
}
