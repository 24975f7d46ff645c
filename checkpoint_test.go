package kvroute

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
)

// storeBlocks stores n blocks of tokens from seed on endpoint directly in
// the index, recording pos as the endpoint's position (as the event
// subscriber would).
func storeBlocks(t *testing.T, ix *kvindex.Index, endpoint string, seed, n int, pos string) []uint32 {
	t.Helper()
	toks := prompt(seed, n*ix.BlockSize())
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = uint64(seed*1000 + i)
	}
	pl := ix.LockPosition(endpoint)
	require.NoError(t, ix.Store(endpoint, &kvindex.StoreEvent{EngineHashes: hashes, Tokens: toks,
		BlockSize: ix.BlockSize(), Model: testModel, Group: 0, Kind: "full_attention"}))
	pl.Set([]byte(pos))
	pl.Unlock()
	return toks
}

// ckptRouter builds a Router without events or render with a checkpoint
// at path (written only on Close) and the given registry.
func ckptRouter(t *testing.T, path string, reg prometheus.Registerer, mutate func(*Config)) *Router {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = false
	cfg.DisableRender = true
	cfg.Checkpoint = CheckpointConfig{Path: path, Interval: -1}
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := New(context.Background(), cfg, Options{Registerer: reg, Logger: testLogger(t)})
	require.NoError(t, err)
	return r
}

func restores(t *testing.T, reg *prometheus.Registry, source, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_index_restore_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["source"] == source && got["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestCheckpointWrittenOnCloseAndLoadedOnNew(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	path := filepath.Join(t.TempDir(), "index.ckpt")
	reg := prometheus.NewRegistry()
	r := ckptRouter(t, path, reg, nil)
	require.Equal(t, 1.0, restores(t, reg, "file", "missing"))
	toks := storeBlocks(t, r.Index(), "10.0.0.1:8000", 3, 6, "p1")
	storeBlocks(t, r.Index(), "10.0.0.2:8000", 4, 2, "p2")
	r.Close()
	require.Equal(t, 1.0, testutil.ToFloat64(r.snap.met.writes.WithLabelValues("ok")))
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left behind")

	reg2 := prometheus.NewRegistry()
	r2 := ckptRouter(t, path, reg2, nil)
	defer r2.Close()
	require.Equal(t, 1.0, restores(t, reg2, "file", "loaded"))
	require.Equal(t, 8, r2.Index().Stats().Memberships)
	pos, ok := r2.Index().Position("10.0.0.1:8000")
	require.True(t, ok)
	require.Equal(t, "p1", string(pos))
	var m kvindex.MatchResult
	r2.Index().Match(kvindex.Keys(nil, toks, r2.Index().BlockSize(), &kvindex.KeyParams{Model: testModel}), []string{"10.0.0.1:8000"}, &m)
	require.Equal(t, 6, m.Endpoints()[0].Blocks)

	// The first endpoint list drops restored endpoints it does not name.
	require.NoError(t, r2.SetEndpoints([]Endpoint{{ID: "10.0.0.1:8000"}}))
	require.Equal(t, 6, r2.Index().Stats().Memberships)
	_, ok = r2.Index().Position("10.0.0.2:8000")
	require.False(t, ok)
}

// Every bad checkpoint is a clear logged error and a counted outcome; the
// router starts empty and never loads part of the file.
func TestCheckpointBadFilesStartEmpty(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dir := t.TempDir()
	good := filepath.Join(dir, "good.ckpt")
	r := ckptRouter(t, good, nil, nil)
	for i := 0; i < 5; i++ {
		storeBlocks(t, r.Index(), "10.0.0.1:8000", 10+i, 3, "p")
		storeBlocks(t, r.Index(), "10.0.0.2:8000", 20+i, 3, "q")
	}
	r.Close()
	data, err := os.ReadFile(good)
	require.NoError(t, err)

	resum := func(b []byte) { binary.LittleEndian.PutUint64(b[20:], xxh64(b[:20])) }
	cases := map[string]struct {
		data   []byte
		result string
		mutate func(*Config)
	}{
		"truncated":       {data[:len(data)-9], kvindex.SnapshotReasonTruncated, nil},
		"truncated early": {data[:40], kvindex.SnapshotReasonTruncated, nil},
		"empty":           {nil, kvindex.SnapshotReasonTruncated, nil},
		"corrupt":         {flip(data, 60), kvindex.SnapshotReasonChecksum, nil},
		"not a snapshot":  {[]byte("{\"hello\": \"world\"} and some more text"), kvindex.SnapshotReasonMagic, nil},
		"wrong version": {edit(data, func(b []byte) {
			binary.LittleEndian.PutUint16(b[8:], kvindex.SnapshotFormatVersion+1)
			resum(b)
		}), kvindex.SnapshotReasonVersion, nil},
		"wrong key scheme": {edit(data, func(b []byte) {
			binary.LittleEndian.PutUint16(b[10:], kvindex.KeySchemeVersion+1)
			resum(b)
		}), kvindex.SnapshotReasonKeyScheme, nil},
		"wrong block size": {data, kvindex.SnapshotReasonBlockSize, func(c *Config) { c.BlockSize = 32 }},
		"trailing garbage": {append(bytes.Clone(data), "x"...), kvindex.SnapshotReasonMalformed, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "index.ckpt")
			require.NoError(t, os.WriteFile(path, c.data, 0o600))
			reg := prometheus.NewRegistry()
			r := ckptRouter(t, path, reg, c.mutate)
			defer r.Close()
			require.Equal(t, 1.0, restores(t, reg, "file", c.result))
			require.Zero(t, r.Index().Stats().Memberships, "nothing of a bad file is loaded")
			kept, err := os.ReadFile(path + ".rejected")
			require.NoError(t, err, "the refused file is kept for inspection")
			require.Equal(t, len(c.data), len(kept))
			require.True(t, bytes.Equal(c.data, kept))
			require.Zero(t, r.Index().Stats().Endpoints)
			_, ok := r.Index().Position("10.0.0.1:8000")
			require.False(t, ok)
		})
	}
	// An unreadable path (a directory) is an error too, not a crash.
	reg := prometheus.NewRegistry()
	rd := ckptRouter(t, dir, reg, nil)
	require.Equal(t, 1.0, restores(t, reg, "file", kvindex.SnapshotReasonRead))
	require.Error(t, rd.Checkpoint(), "a directory cannot be replaced by a file")
	rd.snap.cfg.Path = "" // nothing to write on Close
	rd.Close()
}

func TestCheckpointConfigValidation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Checkpoint.Path = "/nonexistent-dir-kvroute/x.ckpt"
	require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig)
	cfg = DefaultConfig()
	cfg.Bootstrap.Peers = []string{"10.0.0.1:9091"}
	require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig)
	got, err := LoadConfig(bytes.NewReader([]byte(`{"checkpoint":{"path":"` + filepath.Join(t.TempDir(), "c") + `"},"bootstrap":{"peers":["http://10.0.0.5:9091/kvroute/snapshot"],"token":"s3cret"}}`)))
	require.NoError(t, err) // durations ("interval", "timeout") are decoded by the shared strict decoder
	require.NotEmpty(t, got.Checkpoint.Path)
	require.Equal(t, "s3cret", got.Bootstrap.Token)
}

// The checkpoint and bootstrap durations go through the strict decoder
// every config uses: Go duration strings ("1m" was avoided here before,
// when the old decoder rejected it), a bare number or an unknown key an
// error naming its path, and a marshalled Config reads back the same.
func TestCheckpointConfigDurations(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c")
	got, err := LoadConfig(strings.NewReader(`{"checkpoint":{"path":"` + path + `","interval":"1m"},` +
		`"bootstrap":{"peers":["http://10.0.0.5:9091/kvroute/snapshot"],"timeout":"1m30s"}}`))
	require.NoError(t, err)
	require.Equal(t, time.Minute, got.Checkpoint.Interval)
	require.Equal(t, 90*time.Second, got.Bootstrap.Timeout)

	got, err = LoadConfig(strings.NewReader(`{"checkpoint":{"interval":"-1s"},"bootstrap":{"timeout":"250ms"}}`))
	require.NoError(t, err, "a negative interval means: write only on Close")
	require.Equal(t, -time.Second, got.Checkpoint.Interval)
	require.Equal(t, 250*time.Millisecond, got.Bootstrap.Timeout)

	for in, want := range map[string]string{
		`{"checkpoint":{"interval":60}}`:         "checkpoint.interval",
		`{"bootstrap":{"timeout":120000000000}}`: "bootstrap.timeout",
		`{"checkpoint":{"interval":"soon"}}`:     "checkpoint.interval",
		`{"checkpoint":{"pathx":"/tmp/c"}}`:      "checkpoint.pathx",
		`{"bootstrap":{"Token":"s3cret"}}`:       "bootstrap.Token",
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.ErrorIs(t, err, ErrInvalidConfig, in)
		require.ErrorContains(t, err, want, in)
	}

	cfg := DefaultConfig()
	cfg.Checkpoint = CheckpointConfig{Path: path, Interval: 45 * time.Second}
	cfg.Bootstrap = BootstrapConfig{Peers: []string{"https://peer:9091/kvroute/snapshot"}, Token: "t", Timeout: 2 * time.Minute}
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.Contains(t, string(data), `"interval":"45s"`)
	require.Contains(t, string(data), `"timeout":"2m0s"`)
	back, err := LoadConfig(bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, cfg.Checkpoint, back.Checkpoint)
	require.Equal(t, cfg.Bootstrap, back.Bootstrap)
}

// peerRouter serves a warm router's snapshot over a real HTTP server.
func peerRouter(t *testing.T, token string, blockSize int) (*Router, *httptest.Server) {
	t.Helper()
	r := testRouter(t, func(c *Config) {
		c.Bootstrap.Token = token
		if blockSize != 0 {
			c.BlockSize = blockSize
		}
	}, Options{})
	for i := 0; i < 4; i++ {
		storeBlocks(t, r.Index(), "10.0.0.1:8000", 30+i, 4, "peer-pos")
	}
	srv := httptest.NewServer(r.SnapshotHandler())
	t.Cleanup(srv.Close)
	return r, srv
}

func bootRouter(t *testing.T, reg prometheus.Registerer, b BootstrapConfig) *Router {
	return testRouter(t, func(c *Config) { c.Bootstrap = b }, Options{Registerer: reg, Logger: testLogger(t)})
}

func TestPeerBootstrap(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	peer, srv := peerRouter(t, "tok", 0)
	var want bytes.Buffer
	_, err := peer.Index().WriteSnapshot(&want)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	r := bootRouter(t, reg, BootstrapConfig{Peers: []string{srv.URL}, Token: "tok"})
	require.Equal(t, 1.0, restores(t, reg, "peer", "loaded"))
	var got bytes.Buffer
	_, err = r.Index().WriteSnapshot(&got)
	require.NoError(t, err)
	require.Equal(t, want.Bytes(), got.Bytes(), "the replica holds exactly the peer's index")

	// Wrong or missing token: refused, counted on both sides, empty start.
	for _, tok := range []string{"", "wrong"} {
		reg := prometheus.NewRegistry()
		r := bootRouter(t, reg, BootstrapConfig{Peers: []string{srv.URL}, Token: tok})
		require.Equal(t, 1.0, restores(t, reg, "peer", "refused"))
		require.Zero(t, r.Index().Stats().Memberships)
	}
	require.Equal(t, 2.0, testutil.ToFloat64(peer.snap.met.serves.WithLabelValues("unauthorized")))
	resp, err := http.Post(srv.URL, "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// The first reachable peer with a valid snapshot wins; unreachable peers, a
// peer with another block size and a peer dying mid-stream are skipped,
// each counted.
func TestPeerBootstrapSkipsBadPeers(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	_, good := peerRouter(t, "", 0)
	_, otherBS := peerRouter(t, "", 32)

	// A peer that sends half a snapshot and drops the connection.
	peer, _ := peerRouter(t, "", 0)
	var full bytes.Buffer
	_, err := peer.Index().WriteSnapshot(&full)
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

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String() + "/kvroute/snapshot"
	require.NoError(t, ln.Close())

	reg := prometheus.NewRegistry()
	r := bootRouter(t, reg, BootstrapConfig{Peers: []string{dead, dying.URL, otherBS.URL, futurePeer.URL, good.URL}})
	require.Equal(t, 1.0, restores(t, reg, "peer", "unreachable"))
	require.Equal(t, 1.0, restores(t, reg, "peer", kvindex.SnapshotReasonBlockSize))
	require.Equal(t, 1.0, restores(t, reg, "peer", kvindex.SnapshotReasonVersion))
	require.Equal(t, 1.0, restores(t, reg, "peer", "loaded"))
	dyingResult := restores(t, reg, "peer", kvindex.SnapshotReasonTruncated) + restores(t, reg, "peer", kvindex.SnapshotReasonRead)
	require.Equal(t, 1.0, dyingResult, "the dying peer is refused as truncated or as a read error")
	require.Equal(t, 16, r.Index().Stats().Memberships)

	// Only bad peers: the router starts empty.
	reg = prometheus.NewRegistry()
	r = bootRouter(t, reg, BootstrapConfig{Peers: []string{dying.URL, otherBS.URL}})
	require.Zero(t, r.Index().Stats().Memberships)
	require.Zero(t, restores(t, reg, "peer", "loaded"))
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x10
	return c
}

func edit(b []byte, f func([]byte)) []byte {
	c := bytes.Clone(b)
	f(c)
	return c
}

func xxh64(b []byte) uint64 { return xxhash.Sum64(b) }

// The checkpoint is rewritten every interval; Close stops the writer (no
// goroutine left) after a last write.
func TestCheckpointPeriodicWrites(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	path := filepath.Join(t.TempDir(), "index.ckpt")
	r := ckptRouter(t, path, nil, func(c *Config) { c.Checkpoint.Interval = 20 * time.Millisecond })
	storeBlocks(t, r.Index(), "10.0.0.1:8000", 5, 3, "p")
	writes := func() float64 { return testutil.ToFloat64(r.snap.met.writes.WithLabelValues("ok")) }
	require.Eventually(t, func() bool { return writes() >= 2 }, 10*time.Second, 5*time.Millisecond)
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	_, err = FileSource{Path: path}.Load(context.Background(), ix)
	require.NoError(t, err, "a periodic checkpoint is a complete snapshot")
	require.Equal(t, 3, ix.Stats().Memberships)
	before := writes()
	r.Close()
	require.GreaterOrEqual(t, writes(), before+1, "Close writes the last checkpoint")
}
