package snapshot

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/routertest"
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

	c, _ := newClient(t, ClientConfig{Timeout: 30 * time.Second, Backoff: 10 * time.Millisecond, Limiter: NewLimiter(1)})
	var r Reply
	routertest.SilentPeersClosedAsIdle(t, routertest.Server{Endpoint: s.Endpoint(), Open: s.srv.Open,
		Idle: func() uint64 { return s.Stats().Idle }, Stats: func() any { return s.Stats() }}, maxConns,
		func(ctx context.Context) (err error) {
			r, err = c.Fetch(ctx, s.Endpoint())
			return err
		})
	require.EqualValues(t, 7, r.Seq)
}

// The idle timeout defaults to DefaultServerIdleTimeout.
func TestServerIdleTimeoutDefault(t *testing.T) {
	defer leakcheck.Check(t)()
	s, err := NewServer(ServerConfig{Addr: "tcp://127.0.0.1:0"}, SourceFunc(func() (int64, [][]byte, bool) { return 0, nil, false }), Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.Equal(t, DefaultServerIdleTimeout, s.cfg.IdleTimeout)
}
