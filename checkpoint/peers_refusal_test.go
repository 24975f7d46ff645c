package checkpoint

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A peer that refuses the snapshot (a status other than 200) and then
// stalls in the body of its refusal is abandoned after the progress
// timeout, as a peer stalled anywhere else is: its refusal stands, and the
// bootstrap does not wait on it for as long as the peer keeps the
// connection open (a PeerSource alone, with no transfer timeout, would
// wait forever).
func TestPeerRefusalStalledInItsBodyIsAbandoned(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	gone := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("the start of an error page"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			gone <- struct{}{}
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before Close

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ix := newIndex(t, testBlockSize)
	errc := make(chan error, 1)
	go func() {
		_, err := PeerSource{URL: srv.URL, ProgressTimeout: 100 * time.Millisecond}.Load(ctx, ix)
		errc <- err
	}()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, errPeerStatus)
		require.Equal(t, "refused", restoreResult(err))
	case <-time.After(time.Minute): // a hang guard only
		cancel()
		<-errc
		t.Fatal("a peer stalled in the body of its refusal was waited for past the progress timeout")
	}
	<-gone // the request was cancelled
	require.Zero(t, ix.Stats().Endpoints)
}
