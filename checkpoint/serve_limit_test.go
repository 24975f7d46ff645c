package checkpoint

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// With maxConcurrentServes snapshots being served, one more request is
// answered 503 with Retry-After and counted as busy, writing no snapshot;
// once a serve ends the next request gets its snapshot.
func TestHandlerBoundsConcurrentServes(t *testing.T) {
	k, srv := peer(t, "", 0)
	for range maxConcurrentServes { // the serves in progress
		k.serving <- struct{}{}
	}
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.NotEqual(t, SnapshotContentType, resp.Header.Get("Content-Type"), string(body))
	require.Equal(t, 1.0, testutil.ToFloat64(k.met.serves.WithLabelValues("busy")))

	<-k.serving // one serve ended
	resp, err = http.Get(srv.URL)
	require.NoError(t, err)
	body, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, body)
	require.Equal(t, 1.0, testutil.ToFloat64(k.met.serves.WithLabelValues("ok")))
	require.Len(t, k.serving, maxConcurrentServes-1, "the served request gave its slot back")
}

// busyOnce answers the first n requests 503 with Retry-After retry, as a
// replica serving 4 snapshots does, and passes the others to h; it counts
// the requests.
func busyOnce(t *testing.T, h http.Handler, n int, retry string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var reqs atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if int(reqs.Add(1)) <= n {
			w.Header().Set("Retry-After", retry)
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &reqs
}

// A bootstrap whose only peer is busy (503 with Retry-After) asks it again
// once the time it names has passed, within the bootstrap's timeout, rather
// than giving up and starting empty; each busy answer is counted ("busy").
// One that names a time beyond the timeout is not waited for, and a busy
// peer is not waited for while another serves.
func TestPeerBootstrapHonoursRetryAfter(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	p, _ := peer(t, "", 0)
	srv, reqs := busyOnce(t, p.Handler(), 1, "1")
	reg := prometheus.NewRegistry()
	start := time.Now()
	k := boot(t, reg, BootstrapConfig{Peers: []string{srv.URL}})
	require.Equal(t, 1.0, restores(t, reg, "peer", "busy"))
	require.Equal(t, 1.0, restores(t, reg, "peer", "loaded"))
	require.EqualValues(t, 2, reqs.Load())
	require.GreaterOrEqual(t, time.Since(start), time.Second, "asked again after Retry-After, not at once")
	require.NotZero(t, k.ix.Stats().Memberships)

	// Retry-After beyond the bootstrap's timeout: not waited for.
	srv, reqs = busyOnce(t, p.Handler(), 1, "3600")
	reg = prometheus.NewRegistry()
	start = time.Now()
	k = boot(t, reg, BootstrapConfig{Peers: []string{srv.URL}, Timeout: time.Minute})
	require.Less(t, time.Since(start), 30*time.Second)
	require.Equal(t, 1.0, restores(t, reg, "peer", "busy"))
	require.Zero(t, restores(t, reg, "peer", "loaded"))
	require.EqualValues(t, 1, reqs.Load())
	require.Zero(t, k.ix.Stats().Memberships)

	// Another peer serves: the busy one is not asked again.
	busy, busyReqs := busyOnce(t, p.Handler(), 1, "1")
	_, good := peer(t, "", 0)
	reg = prometheus.NewRegistry()
	boot(t, reg, BootstrapConfig{Peers: []string{busy.URL, good.URL}})
	require.Equal(t, 1.0, restores(t, reg, "peer", "loaded"))
	require.EqualValues(t, 1, busyReqs.Load())
}
