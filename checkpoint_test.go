package kvroute

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// These tests cover how a Router wires package checkpoint: the
// "checkpoint" and "bootstrap" configuration keys, the restore in New
// (bounded by New's context), the last checkpoint on Close and the first
// endpoint list dropping restored endpoints it does not name. The
// checkpoint's own behaviour is tested in package checkpoint.

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
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	cfg.Checkpoint = checkpoint.Config{Path: path, Interval: -1}
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t)}})
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
	require.FileExists(t, path, "Close writes the checkpoint")

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
	require.NoError(t, r2.Checkpoint(), "Checkpoint writes now")

	// The first endpoint list drops restored endpoints it does not name.
	require.NoError(t, r2.SetEndpoints([]Endpoint{{ID: "10.0.0.1:8000"}}))
	require.Equal(t, 6, r2.Index().Stats().Memberships)
	_, ok = r2.Index().Position("10.0.0.2:8000")
	require.False(t, ok)

	// Without a checkpoint path, Checkpoint is a configuration error.
	r3 := testRouter(t, nil, Options{})
	require.ErrorIs(t, r3.Checkpoint(), ErrInvalidConfig)
}

// Two Routers on one checkpoint path (two gateways, or a gateway and a
// picker, on a shared volume) would restore and overwrite each other's
// index: New refuses the second, naming the path, and the path is free
// again once the first has closed.
func TestSecondRouterOnOneCheckpointPathIsRefused(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	path := filepath.Join(t.TempDir(), "index.ckpt")
	r := ckptRouter(t, path, prometheus.NewRegistry(), nil)
	storeBlocks(t, r.Index(), "10.0.0.1:8000", 3, 2, "p1")
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	cfg.Checkpoint = checkpoint.Config{Path: path, Interval: -1}
	reg := prometheus.NewRegistry()
	_, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t)}})
	require.ErrorIs(t, err, checkpoint.ErrPathInUse)
	require.Contains(t, err.Error(), path)
	require.Empty(t, familyNames(t, reg), "the refused Router leaves nothing registered")

	r.Close()
	r2 := ckptRouter(t, path, prometheus.NewRegistry(), nil)
	defer r2.Close()
	require.Equal(t, 2, r2.Index().Stats().Memberships, "the first Router's last checkpoint loads")
}

// The Router's clock (Options.Clock) drives its checkpoint's periodic
// writer, as it drives the Router's other periodic work: a Router on a
// Manual clock writes its checkpoint when that clock passes the interval,
// not when the wall clock does.
func TestCheckpointIntervalRunsOnTheRoutersClock(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	path := filepath.Join(t.TempDir(), "index.ckpt")
	clk := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	cfg.Checkpoint = checkpoint.Config{Path: path, Interval: time.Hour}
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Logger: testLogger(t), Clock: clk}})
	require.NoError(t, err)
	defer r.Close()
	require.Eventually(t, func() bool {
		clk.Advance(time.Hour)
		return fileExists(path)
	}, 5*time.Second, 10*time.Millisecond, "an hour of the Router's clock writes the checkpoint")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestCheckpointConfigValidation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Checkpoint.Path = "/nonexistent-dir-kvroute/x.ckpt"
	require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig)
	require.EqualError(t, cfg.Validate(), `kvroute: invalid config: checkpoint.path "/nonexistent-dir-kvroute/x.ckpt": directory does not exist`)
	cfg = DefaultConfig()
	cfg.Bootstrap.Peers = []string{"10.0.0.1:9091"}
	require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig)
	require.EqualError(t, cfg.Validate(), `kvroute: invalid config: bootstrap.peers: "10.0.0.1:9091" is not an http(s) URL`)
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
	cfg.Checkpoint = checkpoint.Config{Path: path, Interval: 45 * time.Second}
	cfg.Bootstrap = checkpoint.BootstrapConfig{Peers: []string{"https://peer:9091/kvroute/snapshot"}, Token: "t", Timeout: 2 * time.Minute}
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.Contains(t, string(data), `"interval":"45s"`)
	require.Contains(t, string(data), `"timeout":"2m0s"`)
	back, err := LoadConfig(bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, cfg.Checkpoint, back.Checkpoint)
	require.Equal(t, cfg.Bootstrap, back.Bootstrap)
}

// bootstrap.progressTimeout, maxSectionBytes, serveWriteTimeout and
// serveMinRate are read by the strict decoder (a duration string, a byte
// count, bytes per second), zero means the defaults, and negative values
// are refused.
func TestBootstrapLimitKeys(t *testing.T) {
	got, err := LoadConfig(strings.NewReader(`{"bootstrap":{"progressTimeout":"750ms","maxSectionBytes":1048576,"serveWriteTimeout":"20s","serveMinRate":65536}}`))
	require.NoError(t, err)
	require.Equal(t, 750*time.Millisecond, got.Bootstrap.ProgressTimeout)
	require.Equal(t, 20*time.Second, got.Bootstrap.ServeWriteTimeout)
	require.EqualValues(t, 65536, got.Bootstrap.ServeMinRate)
	require.EqualValues(t, 1<<20, got.Bootstrap.MaxSectionBytes)
	eps, err := LoadConfig(strings.NewReader(`{"bootstrap":{"maxEndpoints":64}}`))
	require.NoError(t, err)
	require.Equal(t, 64, eps.Bootstrap.MaxEndpoints)
	require.Zero(t, DefaultConfig().Bootstrap.MaxEndpoints, "zero: checkpoint.DefaultMaxEndpoints")
	skew, err := LoadConfig(strings.NewReader(`{"bootstrap":{"maxClockSkew":"10s"}}`))
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, skew.Bootstrap.MaxClockSkew)
	require.Zero(t, DefaultConfig().Bootstrap.MaxClockSkew, "zero: checkpoint.DefaultBootstrapMaxClockSkew")
	data, err := json.Marshal(got)
	require.NoError(t, err)
	require.Contains(t, string(data), `"progressTimeout":"750ms"`)
	require.Contains(t, string(data), `"maxSectionBytes":1048576`)
	require.Contains(t, string(data), `"serveMinRate":65536`)

	def := DefaultConfig()
	require.Zero(t, def.Bootstrap.ProgressTimeout, "zero: checkpoint.DefaultBootstrapProgressTimeout")
	require.Zero(t, def.Bootstrap.MaxSectionBytes, "zero: checkpoint.DefaultMaxSectionBytes")
	require.Zero(t, def.Bootstrap.ServeWriteTimeout, "zero: checkpoint.DefaultServeWriteTimeout")
	require.Zero(t, def.Bootstrap.ServeMinRate, "zero: checkpoint.DefaultServeMinRate")

	for in, want := range map[string]string{
		`{"bootstrap":{"progressTimeout":5}}`:         "bootstrap.progressTimeout",
		`{"bootstrap":{"progressTimeout":"-1s"}}`:     "bootstrap.progressTimeout",
		`{"bootstrap":{"serveWriteTimeout":"-1s"}}`:   "bootstrap.serveWriteTimeout",
		`{"bootstrap":{"serveMinRate":-1}}`:           "bootstrap.serveMinRate",
		`{"bootstrap":{"serveMinRate":"1MiB"}}`:       "bootstrap.serveMinRate",
		`{"bootstrap":{"maxSectionBytes":-1}}`:        "bootstrap.maxSectionBytes",
		`{"bootstrap":{"maxSectionBytes":"1MiB"}}`:    "bootstrap.maxSectionBytes",
		`{"bootstrap":{"max_section_bytes":1048576}}`: "bootstrap.max_section_bytes",
		`{"bootstrap":{"maxClockSkew":30}}`:           "bootstrap.maxClockSkew",
		`{"bootstrap":{"maxClockSkew":"-1s"}}`:        "bootstrap.maxClockSkew",
		`{"bootstrap":{"maxEndpoints":-1}}`:           "bootstrap.maxEndpoints",
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.ErrorIs(t, err, ErrInvalidConfig, in)
		require.ErrorContains(t, err, want, in)
	}
}

// New returns promptly with the context's error when its context is
// cancelled while a peer of Config.Bootstrap has not answered, even with
// progress and bootstrap timeouts far away; it leaves nothing running and
// nothing registered.
func TestNewCancelledDuringBootstrap(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	arrived, gone := make(chan struct{}, 1), make(chan struct{}, 1)
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			gone <- struct{}{}
		case <-release:
		}
	}))
	defer silent.Close()
	defer close(release) // before Close: the handler returns

	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	cfg.Bootstrap = checkpoint.BootstrapConfig{Peers: []string{silent.URL}, Timeout: 10 * time.Minute, ProgressTimeout: 10 * time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		r   *Router
		err error
	}
	done := make(chan result, 1)
	reg := prometheus.NewRegistry()
	go func() {
		r, err := New(ctx, cfg, Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t)}})
		done <- result{r, err}
	}()
	<-arrived
	cancel()
	var res result
	select {
	case res = <-done:
	case <-time.After(time.Minute): // far beyond a prompt return, far below the timeouts
		t.Fatal("New did not return after its context was cancelled")
	}
	require.Nil(t, res.r)
	require.ErrorIs(t, res.err, context.Canceled)
	<-gone
	require.Empty(t, familyNames(t, reg), "a failed New leaves nothing registered")
}

// A Router serves its index to peers through SnapshotHandler.
func TestSnapshotHandlerServesTheIndex(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	r := testRouter(t, func(c *Config) { c.Bootstrap.Token = "tok" }, Options{})
	storeBlocks(t, r.Index(), "10.0.0.1:8000", 3, 4, "p")
	srv := httptest.NewServer(r.SnapshotHandler())
	defer srv.Close()
	b := testRouter(t, func(c *Config) {
		c.Bootstrap = checkpoint.BootstrapConfig{Peers: []string{srv.URL}, Token: "tok"}
	}, Options{})
	require.Equal(t, 4, b.Index().Stats().Memberships)
}
