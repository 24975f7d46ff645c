package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// Bounds of the stall tests: a progress timeout short enough to keep the
// tests quick and long enough that a healthy peer on a loaded machine never
// trips it, and a bootstrap timeout far beyond anything the tests wait for,
// so that finishing before it shows the stalled peers were abandoned.
const (
	testProgressTimeout  = 3 * time.Second
	testBootstrapTimeout = 10 * time.Minute
)

// stallingPeer is a real HTTP server that stalls: before its response
// headers, or after the headers and part of a valid snapshot. Each request
// is announced on arrived once the server has sent what it sends; the
// handler returns when the client goes away or the test ends.
type stallingPeer struct {
	srv     *httptest.Server
	arrived chan struct{}
	gone    chan struct{} // a request's client went away
}

func newStallingPeer(t *testing.T, partial []byte) *stallingPeer {
	t.Helper()
	p := &stallingPeer{arrived: make(chan struct{}, 16), gone: make(chan struct{}, 16)}
	release := make(chan struct{})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if partial != nil {
			w.Header().Set("Content-Type", SnapshotContentType)
			_, _ = w.Write(partial)
			w.(http.Flusher).Flush()
		}
		p.arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			p.gone <- struct{}{}
		case <-release:
		}
	}))
	t.Cleanup(p.srv.Close)
	t.Cleanup(func() { close(release) }) // runs before Close
	return p
}

// halfSnapshot returns the first half of a warm peer's snapshot (headers
// and some sections, no trailer).
func halfSnapshot(t *testing.T) []byte {
	t.Helper()
	p, _ := peer(t, "", 0)
	var full bytes.Buffer
	_, err := p.ix.WriteSnapshot(&full)
	require.NoError(t, err)
	return full.Bytes()[:full.Len()/2]
}

func stallBootstrap(peers ...string) BootstrapConfig {
	return BootstrapConfig{Peers: peers, Timeout: testBootstrapTimeout, ProgressTimeout: testProgressTimeout}
}

// newTimed restores like boot and returns how long the restore took.
func newTimed(t *testing.T, reg prometheus.Registerer, b BootstrapConfig) (*Keeper, time.Duration) {
	t.Helper()
	start := time.Now()
	k := boot(t, reg, b)
	return k, time.Since(start)
}

// A peer that sends its headers and part of its snapshot and then stalls
// is abandoned after the progress timeout, counted as "timeout", and the
// healthy peer listed after it is loaded, long before the bootstrap
// timeout. Alone, the stalled peer leaves the router to start empty.
func TestPeerBootstrapAbandonsPeerStalledMidStream(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	_, good := peer(t, "", 0)
	stalled := newStallingPeer(t, halfSnapshot(t))

	reg := prometheus.NewRegistry()
	r, took := newTimed(t, reg, stallBootstrap(stalled.srv.URL, good.URL))
	require.Equal(t, 1.0, restores(t, reg, "peer", "timeout"))
	require.Zero(t, restores(t, reg, "peer", "read_error"))
	require.Equal(t, 1.0, restores(t, reg, "peer", "loaded"))
	require.Equal(t, 16, r.ix.Stats().Memberships, "the healthy peer's index, nothing of the stalled one's")
	require.Less(t, took, testBootstrapTimeout)
	<-stalled.gone // the stalled peer's request was cancelled

	reg = prometheus.NewRegistry()
	r = boot(t, reg, stallBootstrap(stalled.srv.URL))
	require.Equal(t, 1.0, restores(t, reg, "peer", "timeout"))
	require.Zero(t, r.ix.Stats().Memberships)
	require.Zero(t, r.ix.Stats().Endpoints)
}

// A peer that never answers its request is abandoned after the progress
// timeout ("timeout"); listed first, it does not hold up a healthy peer,
// which is asked too once the first has not begun sending within the
// hedge delay.
func TestPeerBootstrapAbandonsPeerStalledBeforeHeaders(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	_, good := peer(t, "", 0)
	silent := newStallingPeer(t, nil)

	reg := prometheus.NewRegistry()
	r, took := newTimed(t, reg, stallBootstrap(silent.srv.URL, good.URL))
	require.Equal(t, 1.0, restores(t, reg, "peer", "loaded"))
	require.Zero(t, restores(t, reg, "peer", "unreachable"))
	require.Equal(t, 16, r.ix.Stats().Memberships)
	require.Less(t, took, testBootstrapTimeout)

	reg = prometheus.NewRegistry()
	r = boot(t, reg, stallBootstrap(silent.srv.URL))
	require.Equal(t, 1.0, restores(t, reg, "peer", "timeout"))
	require.Zero(t, restores(t, reg, "peer", "unreachable"))
	require.Zero(t, r.ix.Stats().Memberships)
}

// Both kinds of stalled peer listed before a healthy one: the healthy one
// is loaded, and nothing of the half-sent snapshot stays.
func TestPeerBootstrapHealthyPeerWinsAfterStalledOnes(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	_, good := peer(t, "", 0)
	silent := newStallingPeer(t, nil)
	half := newStallingPeer(t, halfSnapshot(t))

	reg := prometheus.NewRegistry()
	r, took := newTimed(t, reg, stallBootstrap(silent.srv.URL, half.srv.URL, good.URL))
	require.Equal(t, 1.0, restores(t, reg, "peer", "loaded"))
	require.Equal(t, 16, r.ix.Stats().Memberships)
	require.Less(t, took, testBootstrapTimeout)
	var want, got bytes.Buffer
	p, _ := peer(t, "", 0)
	_, err := p.ix.WriteSnapshot(&want)
	require.NoError(t, err)
	_, err = r.ix.WriteSnapshot(&got)
	require.NoError(t, err)
	require.Equal(t, want.Bytes(), got.Bytes(), "exactly the healthy peer's index")
}

// Restore returns promptly with the context's error when its context is
// cancelled while a peer stalls, before its headers or mid-stream, even
// with progress and bootstrap timeouts far away; it leaves nothing
// running, nothing registered and the index empty.
func TestRestoreCancelledDuringBootstrap(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	for name, partial := range map[string][]byte{"before headers": nil, "mid-stream": halfSnapshot(t)} {
		t.Run(name, func(t *testing.T) {
			peer := newStallingPeer(t, partial)
			b := BootstrapConfig{Peers: []string{peer.srv.URL}, Timeout: testBootstrapTimeout, ProgressTimeout: testBootstrapTimeout}
			ix := newIndex(t, testBlockSize)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				k   *Keeper
				err error
			}
			done := make(chan result, 1)
			reg := prometheus.NewRegistry()
			go func() {
				k, err := Restore(ctx, ix, Config{}, b, Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t)}})
				done <- result{k, err}
			}()
			<-peer.arrived
			cancel()
			var res result
			select {
			case res = <-done:
			case <-time.After(time.Minute): // far beyond a prompt return, far below the timeouts
				t.Fatal("Restore did not return after its context was cancelled")
			}
			require.Nil(t, res.k)
			require.ErrorIs(t, res.err, context.Canceled)
			<-peer.gone
			require.Empty(t, familyNames(t, reg), "a failed Restore leaves nothing registered")
			require.Zero(t, ix.Stats().Endpoints)
		})
	}
}

// An expired context is a context error too, and a PeerSource alone (as
// an embedder would use it) abandons a stalled peer with an error counted
// as "timeout".
func TestPeerSourceStallIsTimeout(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	silent := newStallingPeer(t, nil)
	ix := newIndex(t, testBlockSize)
	_, err := PeerSource{URL: silent.srv.URL, ProgressTimeout: 100 * time.Millisecond}.Load(context.Background(), ix)
	require.ErrorIs(t, err, errPeerStalled)
	require.Equal(t, "timeout", restoreResult(err))

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = PeerSource{URL: silent.srv.URL, ProgressTimeout: time.Hour}.Load(ctx, ix)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.Zero(t, ix.Stats().Endpoints)
}

// The progress timeout counts only the time spent waiting for the peer:
// a reader busy elsewhere between reads (the index loading a large
// section) for longer than the timeout does not abandon a healthy peer,
// while a read that waits that long does. The watch runs on a Manual
// clock, so a reader descheduled inside a read of bytes already there
// does not look like a wait.
func TestProgressWatchCountsOnlyWaits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := telemetry.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const d = 20 * time.Millisecond
	w := newProgressWatch(clk, d, cancel)
	defer w.stop()
	w.idle() // the headers arrived
	body := &watchedBody{r: bytes.NewReader([]byte("abc")), w: w}
	var one [1]byte
	for i := 0; i < 3; i++ {
		n, err := body.Read(one[:])
		require.NoError(t, err)
		require.Equal(t, 1, n)
		clk.Advance(3 * d) // busy applying what arrived: not waiting for the peer
	}
	require.False(t, w.stalled.Load())
	require.NoError(t, ctx.Err(), "a peer that answered every read at once is not cancelled")

	pr, pw := io.Pipe() // a peer that sends nothing
	defer pw.Close()
	stop := context.AfterFunc(ctx, func() { _ = pw.CloseWithError(ctx.Err()) })
	defer stop()
	errc := make(chan error, 1)
	go func() {
		_, err := (&watchedBody{r: pr, w: w}).Read(one[:])
		errc <- err
	}()
	clk.WaitForWaiters(1) // the read is waiting for the peer
	clk.Advance(d - time.Millisecond)
	require.False(t, w.stalled.Load(), "abandoned before the progress timeout")
	clk.Advance(time.Millisecond)
	select {
	case err := <-errc:
		require.ErrorIs(t, err, errPeerStalled)
	case <-time.After(30 * time.Second): // a hang guard only
		t.Fatal("a read waiting past the progress timeout was not abandoned")
	}
	require.True(t, w.stalled.Load())
}

// cancelAtEOFBody serves a response body from memory and cancels when it
// reports the end of input: the context ends in the instant between the
// peer's snapshot having loaded whole and the race looking at the context.
type cancelAtEOFBody struct {
	r      *bytes.Reader
	cancel context.CancelFunc
}

func (b *cancelAtEOFBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n == 0 && err == io.EOF {
		b.cancel()
	}
	return n, err
}

func (b *cancelAtEOFBody) Close() error { return nil }

// cancelAtEOFTransport gives each response a cancelAtEOFBody.
type cancelAtEOFTransport struct{ cancel context.CancelFunc }

func (tr cancelAtEOFTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = &cancelAtEOFBody{r: bytes.NewReader(data), cancel: tr.cancel}
	return resp, nil
}

// A peer's snapshot that has loaded whole when Restore's context ends is
// kept, reported and returned, as a source that loaded is: Restore does
// not fail with the context's error over an index it has filled (its error
// promises an empty index).
func TestPeerSnapshotLoadedAsContextEndsIsKept(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	warm, srv := peer(t, "", 0)
	ix := newIndex(t, testBlockSize)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := PeerSource{URL: srv.URL, Client: &http.Client{Transport: cancelAtEOFTransport{cancel: cancel}}}
	reg := prometheus.NewRegistry()
	k, err := Restore(ctx, ix, Config{}, BootstrapConfig{}, Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t)}, Sources: []IndexSource{src}})
	require.Error(t, ctx.Err(), "the context ended as the snapshot's end was read")
	require.NoError(t, err)
	defer k.Close()
	require.Equal(t, warm.ix.Stats().Endpoints, ix.Stats().Endpoints)
	require.Equal(t, warm.ix.Stats().Memberships, ix.Stats().Memberships)
	pos, ok := ix.Position("10.0.0.1:8000")
	require.True(t, ok)
	require.Equal(t, "peer-pos", string(pos))
	require.Equal(t, 1.0, restores(t, reg, "peer", "loaded"))
}
