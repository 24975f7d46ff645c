package checkpoint

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// signalledBody is a response body that says when a read has started.
type signalledBody struct {
	io.ReadCloser
	reading chan<- struct{}
}

func (b *signalledBody) Read(p []byte) (int, error) {
	select {
	case b.reading <- struct{}{}:
	default:
	}
	return b.ReadCloser.Read(p)
}

// signallingTransport wraps each response body in a signalledBody.
type signallingTransport struct{ reading chan<- struct{} }

func (tr signallingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &signalledBody{ReadCloser: resp.Body, reading: tr.reading}
	return resp, nil
}

// A peer that refuses the snapshot (a status other than 200) and then
// stalls in the body of its refusal is abandoned after the progress
// timeout, as a peer stalled anywhere else is: its refusal stands, and the
// bootstrap does not wait on it for as long as the peer keeps the
// connection open (a PeerSource alone, with no transfer timeout, would
// wait forever). The watch runs on a Manual clock, advanced once the
// client is reading the refusal's body, so the outcome does not depend on
// how fast the loopback delivers the headers.
func TestPeerRefusalStalledInItsBodyIsAbandoned(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	gone := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			gone <- struct{}{}
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before Close

	const progress = time.Hour
	clk := telemetry.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(withClock(context.Background(), clk))
	defer cancel()
	ix := newIndex(t, testBlockSize)
	reading := make(chan struct{}, 1)
	src := PeerSource{URL: srv.URL, ProgressTimeout: progress,
		Client: &http.Client{Transport: signallingTransport{reading: reading}}}
	errc := make(chan error, 1)
	go func() {
		_, err := src.Load(ctx, ix)
		errc <- err
	}()
	<-reading // the status is in; the watch is armed for this read
	clk.Advance(progress)
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
