package gatewaycmd

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
	"github.com/kvroute/kvroute/kvindex"
)

func TestParseFlagsCheckpointAndPeers(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "index.ckpt")
	t.Setenv("KVROUTE_PEER_TOKEN", "from-env")
	o, err := parseFlags([]string{"--endpoints", "10.0.0.1:8000", "--model", "m", "--checkpoint", ckpt,
		"--checkpoint-interval", "30s", "--peers", "http://10.0.0.2:9091/kvroute/snapshot,http://10.0.0.3:9091/kvroute/snapshot",
		"--snapshot-listen", "127.0.0.1:0"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, ckpt, o.server.Router.Checkpoint.Path)
	require.Equal(t, 30*time.Second, o.server.Router.Checkpoint.Interval)
	require.Len(t, o.server.Router.Bootstrap.Peers, 2)
	require.Equal(t, "from-env", o.server.Router.Bootstrap.Token)
	require.Equal(t, "127.0.0.1:0", o.snapshotListen)

	for name, args := range map[string][]string{
		"checkpoint dir missing": {"--endpoints", "a:1", "--checkpoint", "/nonexistent-kvroute/x"},
		"peer not a URL":         {"--endpoints", "a:1", "--peers", "10.0.0.2:9091"},
	} {
		_, err := parseFlags(args, io.Discard, io.Discard)
		require.Error(t, err, name)
	}
}

// The gateway serves its snapshot on the internal listener (token
// required) and writes its checkpoint at shutdown.
func TestRunServesSnapshotAndWritesCheckpoint(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "index.ckpt")
	cfg := writeFile(t, "router.json", `{"events":{"enabled":false},"disableRender":true}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:1", "--model", "m", "--config", cfg,
			"--checkpoint", ckpt, "--snapshot-listen", "127.0.0.1:0", "--peer-token", "tok"}, &stdout, io.Discard, Options{})
	}()
	re := regexp.MustCompile(`snapshot for peers at (http://[0-9.:]+/kvroute/snapshot)`)
	var url string
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(stdout.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	}, 10*time.Second, 5*time.Millisecond)

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err = client.Do(req)
	require.NoError(t, err)
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	_, err = ix.ReadSnapshot(resp.Body, kvindex.SnapshotReadOptions{})
	resp.Body.Close()
	require.NoError(t, err, "a valid snapshot")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
	_, err = os.Stat(ckpt)
	require.NoError(t, err, "the checkpoint is written at shutdown")
}

// The internal snapshot listener closes a keep-alive connection idle for
// the gateway's idleTimeout, as the public listener does; before, it kept
// every connection a peer opened and left.
func TestSnapshotListenerClosesIdleConnections(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := writeFile(t, "router.yaml", "events: {enabled: false}\ndisableRender: true\ngateway:\n  idleTimeout: 300ms\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:1", "--model", "m", "--config", cfg,
			"--snapshot-listen", "127.0.0.1:0", "--peer-token", "tok"}, &stdout, io.Discard, Options{})
	}()
	re := regexp.MustCompile(`snapshot for peers at http://([0-9.:]+)/kvroute/snapshot`)
	var addr string
	require.Eventually(t, func() bool {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}, 10*time.Second, 5*time.Millisecond)

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /kvroute/snapshot HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, resp.Close, "the listener ended a keep-alive connection after one request")
	// Idle now: closed after 300 ms; the deadline only guards against a hang.
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the idle connection was not closed")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

// When the snapshot listener fails while the gateway runs (here: closed
// under it), Run shuts the gateway down and returns the failure, as it does
// for its public listener, so that the process exits non-zero; before, the
// failure was logged and the gateway went on without a snapshot for peers.
func TestRunReturnsTheSnapshotListenersFailure(t *testing.T) {
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncbuf.Buffer
	snap, done := runWithSnapshot(t, ctx, &stderr)
	failSnapshot(t, snap, done, "run went on after its snapshot listener failed")
	require.Contains(t, stderr.String(), "snapshot listener failed")
}

// runWithSnapshot runs the gateway, with args after its own, and a snapshot
// listener, logging to stderr, and returns the snapshot server once it
// serves and the channel of run's result.
func runWithSnapshot(t *testing.T, ctx context.Context, stderr io.Writer, args ...string) (*snapshotServer, chan error) {
	t.Helper()
	cfg := writeFile(t, "router.json", `{"events":{"enabled":false},"disableRender":true}`)
	args = append([]string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:1", "--model", "m", "--config", cfg,
		"--snapshot-listen", "127.0.0.1:0", "--peer-token", "tok"}, args...)
	started := make(chan *snapshotServer, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, io.Discard, stderr, Options{}, func(s *snapshotServer) { started <- s })
	}()
	select {
	case snap := <-started:
		return snap, done
	case err := <-done:
		t.Fatalf("run returned before serving: %v", err)
		return nil, nil
	}
}

// failSnapshot closes snap's listener under it and checks that run returns
// that failure, naming the snapshot address; hang names a run that does not.
func failSnapshot(t *testing.T, snap *snapshotServer, done chan error, hang string) {
	t.Helper()
	require.NoError(t, snap.ln.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, net.ErrClosed)
		require.Contains(t, err.Error(), "index snapshot on "+snap.addr)
	case <-time.After(30 * time.Second):
		t.Fatal(hang)
	}
}

// At SIGTERM the gateway stops accepting at once, even while a peer's
// snapshot transfer is still running on the internal listener: the two
// listeners shut down together within --shutdown-timeout. Before, the
// public listener went on accepting requests until the transfer ended, and
// the requests in flight had only what the transfer left of the timeout.
func TestRunStopsAcceptingWhileASnapshotTransferRuns(t *testing.T) {
	defer leakcheck.Check(t)()
	entered, release := make(chan struct{}), make(chan struct{})
	old := snapshotHandler
	snapshotHandler = func(r *kvroute.Router) http.Handler {
		h := old(r)
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			close(entered) // one transfer in this test
			<-release
			h.ServeHTTP(w, req)
		})
	}
	t.Cleanup(func() { snapshotHandler = old })
	releaseTransfer := sync.OnceFunc(func() { close(release) })
	defer releaseTransfer() // on failure too, before the leak check
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := startRun(t, ctx, "--snapshot-listen", "127.0.0.1:0", "--peer-token", "tok")
	defer g.close()
	// Run announces the snapshot listener after the public one, which
	// startRun waits for.
	re := regexp.MustCompile(`snapshot for peers at (http://[0-9.:]+/kvroute/snapshot)`)
	var m []string
	require.Eventually(t, func() bool {
		m = re.FindStringSubmatch(g.stdout.String())
		return m != nil
	}, 30*time.Second, 5*time.Millisecond, "no snapshot listener announced")

	type result struct {
		code int
		err  error
	}
	transfer := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, m[1], nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := g.client.Do(req)
		if err != nil {
			transfer <- result{err: err}
			return
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		transfer <- result{resp.StatusCode, err}
	}()
	select {
	case <-entered:
	case r := <-transfer:
		t.Fatalf("the transfer ended before it was held: %+v", r)
	}

	cancel() // SIGTERM
	addr := strings.TrimPrefix(g.url, "http://")
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return true
		}
		c.Close()
		return false
	}, 30*time.Second, 5*time.Millisecond, "the public listener still accepts while the snapshot transfer runs")
	select {
	case err := <-g.done:
		t.Fatalf("run returned with the transfer still running: %v", err)
	default:
	}

	releaseTransfer()
	r := <-transfer
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.code, "the transfer in flight completes")
	select {
	case err := <-g.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after the transfer ended")
	}
}

// A --snapshot-listen address that cannot be bound (taken, the public
// listener's own) is refused naming the flag, and the gateway stops; the
// error used to be net's "listen tcp ...: bind: address already in use"
// alone, right after the gateway had said it served, as if --listen had
// failed.
func TestRunRefusesASnapshotAddressItCannotBindNamingTheFlag(t *testing.T) {
	defer leakcheck.Check(t)()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	cfg := writeFile(t, "router.json", `{"events":{"enabled":false},"disableRender":true}`)
	err = run(context.Background(), []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:1", "--model", "m",
		"--config", cfg, "--snapshot-listen", taken.Addr().String(), "--peer-token", "tok"}, io.Discard, io.Discard, Options{}, nil)
	require.ErrorContains(t, err, "--snapshot-listen "+taken.Addr().String()+": ")
	require.ErrorContains(t, err, "address already in use")
}
