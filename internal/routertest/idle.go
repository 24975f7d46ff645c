package routertest

import (
	"context"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/zmqx"
)

// TB is the part of testing.TB the checks need.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
}

// Server is what a check sees of the server under test.
type Server struct {
	// Endpoint is the address its clients dial.
	Endpoint string
	// Open returns the connections it serves now (its
	// zmqx.RouterServer's Open).
	Open func() int
	// Idle returns the connections it closed as idle (its stats').
	Idle func() uint64
	// Stats returns its counters, printed when the check fails.
	Stats func() any
}

// wait bounds each wait for the server to catch up: generous, since the
// waits end at the event awaited and a busy machine may be slow.
const wait = time.Minute

// SilentPeersClosedAsIdle dials maxConns DEALERs (the server's MaxConns)
// to s that complete their handshake and then send nothing, waits until s
// serves them all, so that they hold every connection slot, and runs
// request, a request of the server's own client, which must succeed: its
// client retries until the idle timeout (the server's IdleTimeout, which
// the test keeps short) closes a silent peer and frees a slot. It then
// waits until s has counted every silent peer closed as idle. request
// gets a context that ends after a minute.
func SilentPeersClosedAsIdle(t TB, s Server, maxConns int, request func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for range maxConns { // silent from their handshake on
		d := zmqx.NewDealer(ctx, zmqx.Options{}, nil)
		require.NoError(t, zmqx.Dial(d, s.Endpoint))
		defer func() { _ = d.Close() }()
	}

	// Dial returns once the client's side of the handshake is done; the
	// server may still be finishing its side, and a request that came
	// first would take the slot and have a silent one refused instead.
	if !assert.Eventually(t, func() bool { return s.Open() == maxConns }, wait, time.Millisecond) {
		t.Errorf("the silent connections do not hold every slot: %+v", s.Stats())
		t.FailNow()
	}
	require.NoError(t, request(ctx), "the silent connections kept every slot")
	if !assert.Eventually(t, func() bool { return s.Idle() >= uint64(maxConns) }, wait, time.Millisecond) {
		t.Errorf("the silent connections are not all closed as idle: %+v", s.Stats())
		t.FailNow()
	}
}
