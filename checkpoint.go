package kvroute

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/kvindex"
)

// Checkpoint and bootstrap defaults.
const (
	// DefaultCheckpointInterval is how often the checkpoint is rewritten.
	DefaultCheckpointInterval = time.Minute
	// DefaultBootstrapTimeout bounds loading the state from one source
	// (a peer's whole transfer, or a file).
	DefaultBootstrapTimeout = 2 * time.Minute
	// DefaultMaxSnapshotSectionBytes bounds one endpoint section of a
	// checkpoint file or a peer's snapshot: the memory a restore holds at
	// once is about one section.
	DefaultMaxSnapshotSectionBytes = kvindex.DefaultMaxSnapshotSectionBytes
)

// CheckpointConfig configures the index checkpoint: a file the Router
// rewrites periodically and on Close, and loads on New. vLLM announces a
// block only when it computes it and replays only its last batches
// (10,000 by default), so a router restarted without a checkpoint never
// learns the prefixes cached before the replay window; with it, the index
// starts complete and every event stream resumes from the checkpoint's
// positions.
type CheckpointConfig struct {
	// Path is the checkpoint file; empty disables checkpoints. Its
	// directory must exist; the file is replaced atomically (a temporary
	// file in the same directory, fsync, rename, fsync of the directory).
	Path string `json:"path"`
	// Interval between periodic writes, a duration string (default "1m");
	// negative writes only on Close.
	Interval time.Duration `json:"interval"`
}

// BootstrapConfig configures loading the index when the Router starts —
// from peer replicas, then the checkpoint file — and the token its own
// SnapshotHandler requires.
type BootstrapConfig struct {
	// Peers are the URLs of peer Routers' snapshot handlers, asked in
	// order: when the peer asked has not begun sending its snapshot within
	// half of progressTimeout (at most a second), the next is asked too,
	// and the first to begin sending is loaded (the others are cancelled,
	// and asked again should it fail). The first valid snapshot wins. Peers
	// are tried before the checkpoint file (a live peer's state is newer).
	Peers []string `json:"peers"`
	// Token is the shared bearer token: sent to peers, and required by
	// this Router's SnapshotHandler when non-empty.
	Token string `json:"token"`
	// Timeout bounds loading from one source — one peer's whole transfer,
	// or the file — a duration string (default "2m").
	Timeout time.Duration `json:"timeout"`
	// ProgressTimeout abandons a peer that sends nothing for this long,
	// before its response headers or mid-stream, for the next one; counted
	// in kvroute_index_restore_total as result "timeout". A duration string
	// (default "5s").
	ProgressTimeout time.Duration `json:"progressTimeout"`
	// MaxSectionBytes bounds one endpoint section of a peer's snapshot or
	// the checkpoint file; a larger one is refused ("too_large"). A
	// restore holds about one section in memory at once. Default 1 GiB
	// (DefaultMaxSnapshotSectionBytes).
	MaxSectionBytes int64 `json:"maxSectionBytes"`
}

func (c CheckpointConfig) validate() error {
	if c.Path != "" {
		if fi, err := os.Stat(filepath.Dir(c.Path)); err != nil || !fi.IsDir() {
			return fmt.Errorf("%w: checkpoint.path %q: directory does not exist", ErrInvalidConfig, c.Path)
		}
	}
	return nil
}

func (c BootstrapConfig) validate() error {
	for _, p := range c.Peers {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: bootstrap.peers: %q is not an http(s) URL", ErrInvalidConfig, p)
		}
	}
	switch {
	case c.Timeout < 0:
		return fmt.Errorf("%w: bootstrap.timeout %v is negative", ErrInvalidConfig, c.Timeout)
	case c.ProgressTimeout < 0:
		return fmt.Errorf("%w: bootstrap.progressTimeout %v is negative", ErrInvalidConfig, c.ProgressTimeout)
	case c.MaxSectionBytes < 0:
		return fmt.Errorf("%w: bootstrap.maxSectionBytes %d is negative", ErrInvalidConfig, c.MaxSectionBytes)
	}
	return nil
}

// snapshotState is the Router's checkpoint, bootstrap and snapshot-serving
// state.
type snapshotState struct {
	ix    *kvindex.Index
	log   *slog.Logger
	met   *snapshotMetrics
	cfg   CheckpointConfig
	token string

	mu       sync.Mutex // serialises checkpoint writes; guards restored
	restored map[string]struct{}

	live bool // New succeeded: Close writes the final checkpoint
	stop chan struct{}
	done chan struct{}
}

// newSnapshotState restores the index from the configured sources (peers,
// then the checkpoint file, then extra) and starts nothing yet. It fails
// only when its metrics cannot be registered or ctx ends.
func newSnapshotState(ctx context.Context, cfg Config, ix *kvindex.Index, extra []IndexSource, reg prometheus.Registerer, log *slog.Logger) (*snapshotState, error) {
	met, err := newSnapshotMetrics(reg)
	if err != nil {
		return nil, err
	}
	s := &snapshotState{ix: ix, log: log, met: met, cfg: cfg.Checkpoint, token: cfg.Bootstrap.Token}
	b := cfg.Bootstrap
	var sources []IndexSource
	if cfg.Cluster.Enabled() && len(b.Peers) == 0 {
		sources = append(sources, ClusterPeerSource{Cluster: cfg.Cluster, Token: b.Token,
			ProgressTimeout: b.ProgressTimeout, MaxSectionBytes: b.MaxSectionBytes})
	}
	if len(b.Peers) > 0 {
		peers := make(configuredPeers, len(b.Peers))
		for i, p := range b.Peers {
			peers[i] = PeerSource{URL: p, Token: b.Token, ProgressTimeout: b.ProgressTimeout, MaxSectionBytes: b.MaxSectionBytes}
		}
		sources = append(sources, peers)
	}
	if cfg.Checkpoint.Path != "" {
		sources = append(sources, FileSource{Path: cfg.Checkpoint.Path, MaxSectionBytes: b.MaxSectionBytes})
	}
	sources = append(sources, extra...)
	timeout := b.Timeout
	if timeout == 0 {
		timeout = DefaultBootstrapTimeout
	}
	if s.restored, err = s.restore(ctx, ix, sources, timeout); err != nil {
		return nil, err
	}
	return s, nil
}

// start launches the periodic checkpoint writer.
func (s *snapshotState) start() {
	s.live = true
	if s.cfg.Path == "" {
		return
	}
	iv := s.cfg.Interval
	if iv == 0 {
		iv = DefaultCheckpointInterval
	}
	if iv < 0 {
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(iv)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				_ = s.checkpoint()
			}
		}
	}()
}

// close stops the periodic writer and, after a successful New, writes the
// last checkpoint (the event subscriptions are stopped by then, so it holds
// every applied event). A Router whose New failed never overwrites a
// checkpoint.
func (s *snapshotState) close() {
	if s.stop != nil {
		close(s.stop)
		<-s.done
		s.stop = nil
	}
	if s.live && s.cfg.Path != "" {
		_ = s.checkpoint()
	}
}

// checkpoint writes the index to the checkpoint file atomically.
func (s *snapshotState) checkpoint() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	info, err := writeFileAtomic(s.cfg.Path, s.ix)
	if err != nil {
		s.met.writes.WithLabelValues("error").Inc()
		s.log.Error("Checkpoint write failed; the previous checkpoint is kept", "path", s.cfg.Path, "err", err)
		return err
	}
	s.met.writes.WithLabelValues("ok").Inc()
	s.met.lastWrite.SetToCurrentTime()
	s.met.bytes.Set(float64(info.Bytes))
	s.log.Debug("Checkpoint written", "path", s.cfg.Path, "endpoints", len(info.Endpoints),
		"memberships", info.Memberships, "bytes", info.Bytes, "elapsed", time.Since(start))
	return nil
}

// writeFileAtomic writes ix's snapshot to a temporary file next to path,
// syncs it, renames it over path and syncs the directory, so that path
// always holds a complete snapshot (the old or the new one).
func writeFileAtomic(path string, ix *kvindex.Index) (kvindex.SnapshotInfo, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, base+".tmp-*")
	if err != nil {
		return kvindex.SnapshotInfo{}, err
	}
	tmp := f.Name()
	fail := func(err error) (kvindex.SnapshotInfo, error) {
		_ = f.Close()
		_ = os.Remove(tmp)
		return kvindex.SnapshotInfo{}, err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	info, err := ix.WriteSnapshot(bw)
	if err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return kvindex.SnapshotInfo{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return kvindex.SnapshotInfo{}, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return info, err
	}
	defer d.Close()
	return info, d.Sync()
}

// dropUnlisted clears restored endpoints that the first endpoint list does
// not name: their entries and positions would otherwise stay forever, since
// no subscription will ever update or remove them.
func (s *snapshotState) dropUnlisted(next map[string]Endpoint) {
	s.mu.Lock()
	restored := s.restored
	s.restored = nil
	s.mu.Unlock()
	for name := range restored {
		if _, ok := next[name]; ok {
			continue
		}
		pl := s.ix.LockPosition(name)
		removed := s.ix.Clear(name)
		pl.Clear()
		pl.Unlock()
		s.ix.ForgetPosition(name)
		s.log.Info("Restored endpoint is not in the endpoint list; cleared", "endpoint", name, "memberships", removed)
	}
}

// Checkpoint writes the checkpoint file now (as the periodic writer does).
// It fails when no checkpoint path is configured or the write fails; the
// previous checkpoint is then kept.
func (r *Router) Checkpoint() error {
	if r.snap == nil || r.snap.cfg.Path == "" {
		return fmt.Errorf("%w: no checkpoint path configured", ErrInvalidConfig)
	}
	return r.snap.checkpoint()
}

// snapshotMetrics are the checkpoint, restore and serving metrics.
type snapshotMetrics struct {
	restores            *prometheus.CounterVec
	restoredMemberships prometheus.Gauge
	writes              *prometheus.CounterVec
	lastWrite           prometheus.Gauge
	bytes               prometheus.Gauge
	serves              *prometheus.CounterVec
}

func newSnapshotMetrics(reg prometheus.Registerer) (*snapshotMetrics, error) {
	m := &snapshotMetrics{
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_index_restore_total",
			Help: "Attempts to start the index from a source (file, peer) by result: loaded, missing, truncated, checksum, bad_magic, format_version, key_scheme, block_size, malformed, too_large, conflict, read_error, refused, timeout, unreachable.",
		}, []string{"source", "result"}),
		restoredMemberships: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_index_restored_memberships",
			Help: "Memberships the index started with (0 when it started empty).",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_checkpoint_writes_total",
			Help: "Checkpoint file writes by result (ok, error).",
		}, []string{"result"}),
		lastWrite: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_checkpoint_last_success_timestamp_seconds",
			Help: "Unix time of the last successful checkpoint write.",
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_checkpoint_bytes",
			Help: "Size of the last checkpoint written.",
		}),
		serves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_snapshot_serves_total",
			Help: "Snapshots served to peers by result (ok, unauthorized, method_not_allowed, error).",
		}, []string{"result"}),
	}
	for _, r := range []string{"ok", "error"} {
		m.writes.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.restores, m.restoredMemberships, m.writes, m.lastWrite, m.bytes, m.serves} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
