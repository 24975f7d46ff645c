package checkpoint

import (
	"io"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
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
