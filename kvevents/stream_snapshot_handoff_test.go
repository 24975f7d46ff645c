package kvevents

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A load's fetch and its watchdog settle the load once: whichever comes
// first decides, so a reply that arrives as the watchdog gives up is
// either applied (the watchdog stands down) or discarded as stalled (the
// fetch's own result, error or not, is not counted beside it).
func TestSnapFetchHandOffDecidesOnce(t *testing.T) {
	f := newSnapFetch()
	require.True(t, f.abandon(), "the watchdog first: it abandons the load")
	require.False(t, f.arrived(), "the reply after it does not stand")
	<-f.done // arrived closes done whoever won

	f = newSnapFetch()
	require.True(t, f.arrived(), "the reply first: it stands")
	require.False(t, f.abandon(), "the watchdog after it stands down")
	<-f.done
}
