package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// lockedWriter is a log destination safe for the Server's goroutines.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// When the gateway's listener fails on its own (here: closed under it),
// Done is closed at once, Err names the failure, it is logged at Error, and
// Shutdown still stops everything and reports it. A Server stopped by
// Shutdown has no error.
func TestServerReportsAServeFailure(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	var logs lockedWriter
	srv, err := NewServer(t.Context(), testServerConfig(kvroute.Endpoint{ID: u.id}),
		Options{Set: telemetry.Set{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	require.NoError(t, err)
	select {
	case <-srv.Done():
		t.Fatal("Done before the listener failed")
	default:
	}
	require.NoError(t, srv.Err())

	require.NoError(t, srv.ln.Close())
	select {
	case <-srv.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done was not closed after the listener failed")
	}
	require.ErrorIs(t, srv.Err(), net.ErrClosed)
	require.Contains(t, logs.String(), "level=ERROR msg=\"gateway: serving failed")
	require.ErrorIs(t, srv.Shutdown(context.Background()), net.ErrClosed)

	ok, err := NewServer(t.Context(), testServerConfig(kvroute.Endpoint{ID: u.id}), Options{})
	require.NoError(t, err)
	require.NoError(t, ok.Shutdown(context.Background()))
	<-ok.Done()
	require.NoError(t, ok.Err())
}
