package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

func TestCheckpointWrittenOnCloseAndRestored(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	path := filepath.Join(t.TempDir(), "index.ckpt")
	cfg := Config{Path: path, Interval: -1}
	reg := prometheus.NewRegistry()
	k := started(t, testBlockSize, cfg, BootstrapConfig{}, reg)
	require.Equal(t, 1.0, restores(t, reg, "file", "missing"))
	toks := storeBlocks(t, k.ix, "10.0.0.1:8000", 3, 6, "p1")
	storeBlocks(t, k.ix, "10.0.0.2:8000", 4, 2, "p2")
	k.Close()
	require.Equal(t, 1.0, testutil.ToFloat64(k.met.writes.WithLabelValues("ok")))
	require.Empty(t, familyNames(t, reg), "Close unregisters the metrics")
	require.Equal(t, []string{"index.ckpt", "index.ckpt.lock"}, dirNames(t, filepath.Dir(path)), "no temporary file left behind")

	reg2 := prometheus.NewRegistry()
	k2 := started(t, testBlockSize, cfg, BootstrapConfig{}, reg2)
	require.Equal(t, 1.0, restores(t, reg2, "file", "loaded"))
	require.Equal(t, 8, k2.ix.Stats().Memberships)
	pos, ok := k2.ix.Position("10.0.0.1:8000")
	require.True(t, ok)
	require.Equal(t, "p1", string(pos))
	var m kvindex.MatchResult
	k2.ix.Match(kvindex.Keys(nil, toks, k2.ix.BlockSize(), &kvindex.KeyParams{Model: testModel}), []string{"10.0.0.1:8000"}, &m)
	require.Equal(t, 6, m.Endpoints()[0].Blocks)

	// The first endpoint list drops restored endpoints it does not name;
	// later lists change nothing.
	k2.DropUnlisted(func(id string) bool { return id == "10.0.0.1:8000" })
	require.Equal(t, 6, k2.ix.Stats().Memberships)
	_, ok = k2.ix.Position("10.0.0.2:8000")
	require.False(t, ok)
	k2.DropUnlisted(func(string) bool { return false })
	require.Equal(t, 6, k2.ix.Stats().Memberships)
}

// Every bad checkpoint is a clear logged error and a counted outcome; the
// index starts empty and never loads part of the file.
func TestCheckpointBadFilesStartEmpty(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dir := t.TempDir()
	good := filepath.Join(dir, "good.ckpt")
	k := started(t, testBlockSize, Config{Path: good, Interval: -1}, BootstrapConfig{}, nil)
	for i := 0; i < 5; i++ {
		storeBlocks(t, k.ix, "10.0.0.1:8000", 10+i, 3, "p")
		storeBlocks(t, k.ix, "10.0.0.2:8000", 20+i, 3, "q")
	}
	k.Close()
	data, err := os.ReadFile(good)
	require.NoError(t, err)

	resum := func(b []byte) { binary.LittleEndian.PutUint64(b[20:], xxh64(b[:20])) }
	cases := map[string]struct {
		data      []byte
		result    string
		blockSize int
	}{
		"truncated":       {data[:len(data)-9], kvindex.SnapshotReasonTruncated, 0},
		"truncated early": {data[:40], kvindex.SnapshotReasonTruncated, 0},
		"empty":           {nil, kvindex.SnapshotReasonTruncated, 0},
		"corrupt":         {flip(data, 60), kvindex.SnapshotReasonChecksum, 0},
		"not a snapshot":  {[]byte("{\"hello\": \"world\"} and some more text"), kvindex.SnapshotReasonMagic, 0},
		"wrong version": {edit(data, func(b []byte) {
			binary.LittleEndian.PutUint16(b[8:], kvindex.SnapshotFormatVersion+1)
			resum(b)
		}), kvindex.SnapshotReasonVersion, 0},
		"wrong key scheme": {edit(data, func(b []byte) {
			binary.LittleEndian.PutUint16(b[10:], kvindex.KeySchemeVersion+1)
			resum(b)
		}), kvindex.SnapshotReasonKeyScheme, 0},
		"wrong block size": {data, kvindex.SnapshotReasonBlockSize, 32},
		"trailing garbage": {append(bytes.Clone(data), "x"...), kvindex.SnapshotReasonMalformed, 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "index.ckpt")
			require.NoError(t, os.WriteFile(path, c.data, 0o600))
			reg := prometheus.NewRegistry()
			bs := testBlockSize
			if c.blockSize != 0 {
				bs = c.blockSize
			}
			k := started(t, bs, Config{Path: path, Interval: -1}, BootstrapConfig{}, reg)
			defer k.Close()
			require.Equal(t, 1.0, restores(t, reg, "file", c.result))
			require.Zero(t, k.ix.Stats().Memberships, "nothing of a bad file is loaded")
			kept, err := os.ReadFile(path + ".rejected")
			require.NoError(t, err, "the refused file is kept for inspection")
			require.Equal(t, len(c.data), len(kept))
			require.True(t, bytes.Equal(c.data, kept))
			require.Zero(t, k.ix.Stats().Endpoints)
			_, ok := k.ix.Position("10.0.0.1:8000")
			require.False(t, ok)
		})
	}
	// An unreadable path (a directory) is an error too, not a crash.
	reg := prometheus.NewRegistry()
	kd := started(t, testBlockSize, Config{Path: dir, Interval: -1}, BootstrapConfig{}, reg)
	require.Equal(t, 1.0, restores(t, reg, "file", kvindex.SnapshotReasonRead))
	require.Error(t, kd.Write(), "a directory cannot be replaced by a file")
	kd.cfg.Path = "" // nothing to write on Close
	kd.Close()
}

// Write without a path is an error and writes nothing.
func TestWriteWithoutPath(t *testing.T) {
	k := started(t, testBlockSize, Config{}, BootstrapConfig{}, nil)
	require.ErrorIs(t, k.Write(), errNoPath)
	require.Zero(t, testutil.ToFloat64(k.met.writes.WithLabelValues("error")))
}

func TestPeerBootstrap(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	p, srv := peer(t, "tok", 0)
	var want bytes.Buffer
	_, err := p.ix.WriteSnapshot(&want)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	k := boot(t, reg, BootstrapConfig{Peers: []string{srv.URL}, Token: "tok"})
	require.Equal(t, 1.0, restores(t, reg, "peer", "loaded"))
	var got bytes.Buffer
	_, err = k.ix.WriteSnapshot(&got)
	require.NoError(t, err)
	require.Equal(t, want.Bytes(), got.Bytes(), "the replica holds exactly the peer's index")

	// Wrong or missing token: refused, counted on both sides, empty start.
	for _, tok := range []string{"", "wrong"} {
		reg := prometheus.NewRegistry()
		k := boot(t, reg, BootstrapConfig{Peers: []string{srv.URL}, Token: tok})
		require.Equal(t, 1.0, restores(t, reg, "peer", "refused"))
		require.Zero(t, k.ix.Stats().Memberships)
	}
	require.Equal(t, 2.0, testutil.ToFloat64(p.met.serves.WithLabelValues("unauthorized")))
	resp, err := http.Post(srv.URL, "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// The handler reads the authentication scheme case-insensitively, as HTTP
// defines it (RFC 9110, section 11.1): a client that sends "bearer" or
// "BEARER" with the right token gets the snapshot, not 401.
func TestHandlerBearerSchemeIsCaseInsensitive(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	p, srv := peer(t, "tok", 0)
	for _, auth := range []string{"Bearer tok", "bearer tok", "BEARER tok"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%q", auth)
	}
	for _, auth := range []string{"Bearer wrong", "Basic tok", "Bearertok", "tok"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%q", auth)
	}
	require.Equal(t, 4.0, testutil.ToFloat64(p.met.serves.WithLabelValues("unauthorized")))
	srv.Close()
}

// The first reachable peer with a valid snapshot wins; unreachable peers, a
// peer with another block size and a peer dying mid-stream are skipped,
// each counted.
func TestPeerBootstrapSkipsBadPeers(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	_, good := peer(t, "", 0)
	_, otherBS := peer(t, "", 32)

	// A peer that sends half a snapshot and drops the connection.
	p, _ := peer(t, "", 0)
	var full bytes.Buffer
	_, err := p.ix.WriteSnapshot(&full)
	require.NoError(t, err)
	dying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", SnapshotContentType)
		_, _ = w.Write(full.Bytes()[:full.Len()/2])
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	defer dying.Close()
	// A peer whose format version is from the future.
	future := bytes.Clone(full.Bytes())
	binary.LittleEndian.PutUint16(future[8:], kvindex.SnapshotFormatVersion+1)
	binary.LittleEndian.PutUint64(future[20:], xxh64(future[:20]))
	futurePeer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(future) }))
	defer futurePeer.Close()

	dead := "http://" + testport.Addr(t) + "/kvroute/snapshot" // nothing listens, nor takes the port meanwhile

	reg := prometheus.NewRegistry()
	k := boot(t, reg, BootstrapConfig{Peers: []string{dead, dying.URL, otherBS.URL, futurePeer.URL, good.URL}})
	require.Equal(t, 1.0, restores(t, reg, "peer", "unreachable"))
	require.Equal(t, 1.0, restores(t, reg, "peer", kvindex.SnapshotReasonBlockSize))
	require.Equal(t, 1.0, restores(t, reg, "peer", kvindex.SnapshotReasonVersion))
	require.Equal(t, 1.0, restores(t, reg, "peer", "loaded"))
	dyingResult := restores(t, reg, "peer", kvindex.SnapshotReasonTruncated) + restores(t, reg, "peer", kvindex.SnapshotReasonRead)
	require.Equal(t, 1.0, dyingResult, "the dying peer is refused as truncated or as a read error")
	require.Equal(t, 16, k.ix.Stats().Memberships)

	// Only bad peers: the index starts empty.
	reg = prometheus.NewRegistry()
	k = boot(t, reg, BootstrapConfig{Peers: []string{dying.URL, otherBS.URL}})
	require.Zero(t, k.ix.Stats().Memberships)
	require.Zero(t, restores(t, reg, "peer", "loaded"))
}

// The checkpoint is rewritten every interval; Close stops the writer (no
// goroutine left) after a last write.
func TestCheckpointPeriodicWrites(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	path := filepath.Join(t.TempDir(), "index.ckpt")
	k := started(t, testBlockSize, Config{Path: path, Interval: 20 * time.Millisecond}, BootstrapConfig{}, nil)
	storeBlocks(t, k.ix, "10.0.0.1:8000", 5, 3, "p")
	writes := func() float64 { return testutil.ToFloat64(k.met.writes.WithLabelValues("ok")) }
	require.Eventually(t, func() bool { return writes() >= 2 }, 10*time.Second, 5*time.Millisecond)
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	_, err = FileSource{Path: path}.Load(context.Background(), ix)
	require.NoError(t, err, "a periodic checkpoint is a complete snapshot")
	require.Equal(t, 3, ix.Stats().Memberships)
	before := writes()
	k.Close()
	require.GreaterOrEqual(t, writes(), before+1, "Close writes the last checkpoint")
}

// A keeper that was never started (its router's start failed) never
// overwrites the checkpoint.
func TestCloseWithoutStartWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.ckpt")
	k, err := Restore(context.Background(), newIndex(t, testBlockSize), Config{Path: path}, BootstrapConfig{}, Options{})
	require.NoError(t, err)
	storeBlocks(t, k.ix, "10.0.0.1:8000", 5, 3, "p")
	k.Close()
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// The periodic writer runs on the Options' clock: each interval the clock
// advances by brings one write, and none comes before.
func TestCheckpointPeriodicWritesOnTheOptionsClock(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	path := filepath.Join(t.TempDir(), "index.ckpt")
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	k, err := Restore(context.Background(), newIndex(t, testBlockSize), Config{Path: path, Interval: time.Hour}, BootstrapConfig{},
		Options{Set: telemetry.Set{Clock: clock, Logger: testLogger(t)}})
	require.NoError(t, err)
	k.Start()
	defer k.Close()
	storeBlocks(t, k.ix, "10.0.0.1:8000", 5, 3, "p")
	writes := func() float64 { return testutil.ToFloat64(k.met.writes.WithLabelValues("ok")) }
	clock.WaitForWaiters(1) // the writer's ticker
	clock.Advance(time.Hour - time.Nanosecond)
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "no write before the interval")
	clock.Advance(time.Nanosecond)
	require.Eventually(t, func() bool { return writes() == 1 }, time.Minute, time.Millisecond)
	require.FileExists(t, path)
	clock.Advance(time.Hour)
	require.Eventually(t, func() bool { return writes() == 2 }, time.Minute, time.Millisecond)
}

// A process that died while writing its checkpoint left a temporary file
// beside it, as large as the index. The next keeper to start writing there
// removes such leftovers of its own file (and nothing else in the
// directory), so repeated crashes do not fill the volume.
func TestStartRemovesTemporaryFilesOfCrashedWrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "index.ckpt")
	leftovers := []string{path + ".tmp-123", path + ".tmp-456"}
	others := []string{filepath.Join(dir, "other.ckpt.tmp-1"), filepath.Join(dir, "index.ckpt.rejected"), filepath.Join(dir, "index.ckpt.tmpfile")}
	for _, f := range append(append([]string{}, leftovers...), others...) {
		require.NoError(t, os.WriteFile(f, []byte("partial"), 0o600))
	}
	started(t, testBlockSize, Config{Path: path, Interval: -1}, BootstrapConfig{}, prometheus.NewRegistry())
	for _, f := range leftovers {
		_, err := os.Stat(f)
		require.ErrorIs(t, err, os.ErrNotExist, "%s left behind", f)
	}
	for _, f := range others {
		_, err := os.Stat(f)
		require.NoError(t, err, "%s is not the keeper's to remove", f)
	}
}

// A host calling Restore directly gets the check kvroute.Config's
// validation makes of the bootstrap settings: a negative timeout, which
// made every file restore fail as a timeout, is refused, naming its key,
// and nothing is registered.
func TestRestoreRefusesAnInvalidConfig(t *testing.T) {
	ix := newIndex(t, 4)
	reg := prometheus.NewRegistry()
	opts := Options{Set: telemetry.Set{Registerer: reg}}
	_, err := Restore(context.Background(), ix, Config{}, BootstrapConfig{Timeout: -time.Second}, opts)
	require.ErrorContains(t, err, "bootstrap.timeout")
	_, err = Restore(context.Background(), ix, Config{}, BootstrapConfig{Peers: []string{"10.0.0.5:9091"}}, opts)
	require.ErrorContains(t, err, "bootstrap.peers")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Empty(t, mfs)
}
