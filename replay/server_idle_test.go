package replay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/routertest"
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

	c := newClient(t, ClientConfig{Timeout: 30 * time.Second, Backoff: 10 * time.Millisecond, MaxAttemptsWithoutProgress: 1 << 20})
	var got collector
	var res Result
	routertest.SilentPeersClosedAsIdle(t, routertest.Server{Endpoint: srv.Endpoint(), Open: srv.srv.Open,
		Idle: func() uint64 { return srv.Stats().Idle }, Stats: func() any { return srv.Stats() }}, maxConns,
		func(ctx context.Context) (err error) {
			res, err = c.Replay(ctx, srv.Endpoint(), 0, got.apply)
			return err
		})
	require.Equal(t, seqRange(0, 10), got.seqs)
	require.True(t, res.Covered)
}

// The idle timeout defaults to DefaultServerIdleTimeout.
func TestServerIdleTimeoutDefault(t *testing.T) {
	defer leakcheck.Check(t)()
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0"}, NewBuffer(1), Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Close()) }()
	require.Equal(t, DefaultServerIdleTimeout, srv.cfg.IdleTimeout)
}
