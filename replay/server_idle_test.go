package replay

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
// held every connection slot for as long as they kept their connections
// (the idle timeout defaulted to none), and every other client was closed
// at once. A connection silent for IdleTimeout is now closed and counted,
// and the client that asks gets its replay.
func TestServerClosesIdleConnections(t *testing.T) {
	defer leakcheck.Check(t)()
	const maxConns = 2
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", MaxConns: maxConns, IdleTimeout: time.Second}, filledBuffer(0, 0, 10), Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Close()) }()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range maxConns { // silent from their handshake on
		d := zmqx.NewDealer(ctx, zmqx.Options{}, nil)
		require.NoError(t, zmqx.Dial(d, srv.Endpoint()))
		defer func() { _ = d.Close() }()
	}

	// Dial returns once the client's side of the handshake is done; the
	// server may still be finishing its side, and a replay that came first
	// would take the slot and have a silent one refused instead.
	if !assert.Eventually(t, func() bool { return srv.srv.Open() == maxConns }, time.Minute, time.Millisecond) {
		t.Fatalf("the silent connections do not hold every slot: %+v", srv.Stats())
	}
	c := newClient(t, ClientConfig{Timeout: 30 * time.Second, Backoff: 10 * time.Millisecond, MaxAttemptsWithoutProgress: 1 << 20})
	var got collector
	res, err := c.Replay(ctx, srv.Endpoint(), 0, got.apply)
	require.NoError(t, err, "the silent connections kept every slot")
	require.Equal(t, seqRange(0, 10), got.seqs)
	require.True(t, res.Covered)
	if !assert.Eventually(t, func() bool { return srv.Stats().Idle >= maxConns }, time.Minute, time.Millisecond) {
		t.Fatalf("the silent connections are not both closed as idle: %+v", srv.Stats())
	}
}

// The idle timeout defaults to DefaultServerIdleTimeout.
func TestServerIdleTimeoutDefault(t *testing.T) {
	defer leakcheck.Check(t)()
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0"}, NewBuffer(1), Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Close()) }()
	require.Equal(t, DefaultServerIdleTimeout, srv.cfg.IdleTimeout)
}
