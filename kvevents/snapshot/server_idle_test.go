package snapshot

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqx"
)

// MaxConns clients that completed their handshake and then sent nothing
// held every connection slot for as long as they kept their connections,
// and every other client was closed at once. A connection silent for
// IdleTimeout is now closed and counted, and the client that asks is
// served.
func TestServerClosesIdleConnections(t *testing.T) {
	defer leakcheck.Check(t)()
	const maxConns = 2
	s, err := NewServer(ServerConfig{Addr: "tcp://127.0.0.1:0", PublisherID: testID, MaxConns: maxConns, IdleTimeout: time.Second},
		SourceFunc(func() (int64, [][]byte, bool) { return 7, [][]byte{[]byte("c")}, true }), Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range maxConns { // silent from their handshake on
		d := zmqx.NewDealer(ctx, zmqx.Options{}, nil)
		require.NoError(t, zmqx.Dial(d, s.Endpoint()))
		defer func() { _ = d.Close() }()
	}

	// Dial returns once the client's side of the handshake is done; the
	// server may still be finishing its side, and a fetch that came first
	// would take the slot and have a silent one refused instead.
	if !assert.Eventually(t, func() bool { return s.srv.Open() == maxConns }, time.Minute, time.Millisecond) {
		t.Fatalf("the silent connections do not hold every slot: %+v", s.Stats())
	}
	c, _ := newClient(t, ClientConfig{Timeout: 30 * time.Second, Backoff: 10 * time.Millisecond, Limiter: NewLimiter(1)})
	r, err := c.Fetch(ctx, s.Endpoint())
	require.NoError(t, err, "the silent connections kept every slot")
	require.EqualValues(t, 7, r.Seq)
	if !assert.Eventually(t, func() bool { return s.Stats().Idle >= maxConns }, time.Minute, time.Millisecond) {
		t.Fatalf("the silent connections are not both closed as idle: %+v", s.Stats())
	}
}

// The idle timeout defaults to DefaultServerIdleTimeout.
func TestServerIdleTimeoutDefault(t *testing.T) {
	defer leakcheck.Check(t)()
	s, err := NewServer(ServerConfig{Addr: "tcp://127.0.0.1:0"}, SourceFunc(func() (int64, [][]byte, bool) { return 0, nil, false }), Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.Equal(t, DefaultServerIdleTimeout, s.cfg.IdleTimeout)
}
