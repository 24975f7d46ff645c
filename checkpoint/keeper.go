package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// Options are a Keeper's injected dependencies and extra sources; the zero
// value is valid.
type Options struct {
	// Set's Registerer receives the checkpoint, restore and serving
	// metrics (nil registers none), its Logger the outcome of every
	// restore attempt and write (nil discards), and its Clock drives the
	// periodic writer (nil: the wall clock).
	telemetry.Set
	// Cluster is the router's pool of replicas: when it is enabled and
	// BootstrapConfig.Peers is empty, the pool's live replicas are the
	// first source (ClusterPeerSource). Its SnapshotURL, when set, is the
	// URL the Handler requires a peer's proof of the token to name.
	Cluster cluster.Config
	// Sources are further sources of the index's starting state, tried
	// after the peers and the checkpoint file.
	Sources []IndexSource
}

// Keeper keeps one index persistent: Restore fills the index from the
// first source that delivers a valid snapshot, Start rewrites the
// checkpoint file periodically, Close writes the last one, and Handler
// serves the index to peers that bootstrap from it.
//
// Ownership: Start starts the periodic writer goroutine (when a path is set
// and the interval is not negative), which calls Write on every tick of the
// Options' clock until Close closes stop, and then closes done; Close waits
// for it. mu serialises Write, whoever calls it (the writer, Close, the
// host). restored is set by Restore before the Keeper is returned and
// taken once by DropUnlisted's atomic swap, so that DropUnlisted does not
// wait for a checkpoint write to end. live, stop and done are written by Start
// and Close only, without a lock, so those two must not run concurrently;
// the writer reads stop and done, set before it starts, and Close clears
// stop only once the writer has ended. The fields above mu are set by
// Restore and not written after.
type Keeper struct {
	ix    *kvindex.Index
	set   telemetry.Set
	log   *slog.Logger
	met   *metrics
	cfg   Config
	token string
	// self is the snapshot URL this replica advertises
	// (Options.Cluster.SnapshotURL), which a peer's proof must name; empty:
	// the URL each request names.
	self string
	// skew is the clock skew a peer's proof may show
	// (BootstrapConfig.MaxClockSkew).
	skew time.Duration
	// stall is the time each write of a served snapshot may wait for the
	// peer (BootstrapConfig.ServeWriteTimeout).
	stall time.Duration
	// minRate is the bytes per second a served snapshot must average
	// after stall (BootstrapConfig.ServeMinRate).
	minRate int64

	serving chan struct{} // a slot per snapshot being served (Handler)

	// claim is the locked lock file beside the checkpoint (claimPath),
	// held from Restore until Close; nil without a path. It is set by
	// Restore and released by Close under mu, which also sets closed.
	claim *os.File

	mu       sync.Mutex                          // serialises checkpoint writes; guards claim's release and closed
	closed   bool                                // Close released the path: Write refuses (errClosed)
	restored atomic.Pointer[map[string]struct{}] // the endpoints restored, until DropUnlisted takes them

	live bool // Start was called: Close writes the final checkpoint
	stop chan struct{}
	done chan struct{}
}

// Restore fills ix — freshly created, with no endpoints — from the
// configured sources, in order: the live replicas of Options.Cluster (when
// enabled and boot.Peers is empty), boot.Peers (raced, see
// BootstrapConfig.Peers), the checkpoint file cfg.Path, then
// Options.Sources. The first that loads wins; every outcome is logged and
// counted in kvroute_index_restore_total, and when none loads ix stays
// empty, which is not an error. With a path set, Restore first claims it
// for the Keeper's lifetime (an exclusive lock on the file cfg.Path +
// ".lock", released by Close or the process's end): a path another router
// holds is an error wrapping ErrPathInUse, before anything is read. Restore
// fails only then, when boot is invalid (BootstrapConfig.Validate, the
// check kvroute.Config's validation makes, for a host that calls Restore
// directly), when its metrics cannot be registered, or when ctx ends
// before a source has loaded: it then returns an error wrapping ctx's
// error promptly, leaving ix empty and nothing registered (a source that
// loaded as ctx ended is kept). A failed Restore holds no claim. Nothing
// runs until Start.
func Restore(ctx context.Context, ix *kvindex.Index, cfg Config, boot BootstrapConfig, opts Options) (*Keeper, error) {
	if err := boot.Validate(); err != nil {
		return nil, fmt.Errorf("kvroute: bootstrap.%w", err)
	}
	var claim *os.File
	if cfg.Path != "" {
		var err error
		if claim, err = claimPath(cfg.Path); err != nil {
			return nil, err
		}
	}
	release := func() {
		if claim != nil {
			_ = claim.Close()
		}
	}
	met := newMetrics()
	if err := opts.Register(met.collectors()...); err != nil {
		release()
		return nil, err
	}
	k := &Keeper{ix: ix, set: opts.Set, log: opts.Log(), met: met, cfg: cfg, token: boot.Token, claim: claim,
		stall: boot.ServeWriteTimeout, minRate: boot.ServeMinRate, serving: make(chan struct{}, maxConcurrentServes),
		self: opts.Cluster.SnapshotURL, skew: boot.MaxClockSkew}
	if k.skew <= 0 {
		k.skew = DefaultBootstrapMaxClockSkew
	}
	if k.stall <= 0 {
		k.stall = DefaultServeWriteTimeout
	}
	if k.minRate <= 0 {
		k.minRate = DefaultServeMinRate
	}
	var sources []IndexSource
	if opts.Cluster.Enabled() && len(boot.Peers) == 0 {
		sources = append(sources, ClusterPeerSource{Cluster: opts.Cluster, Token: boot.Token,
			ProgressTimeout: boot.ProgressTimeout, MaxSectionBytes: boot.MaxSectionBytes, MaxEndpoints: boot.MaxEndpoints})
	}
	if len(boot.Peers) > 0 {
		peers := make(configuredPeers, len(boot.Peers))
		for i, p := range boot.Peers {
			peers[i] = PeerSource{URL: p, Token: boot.Token, ProgressTimeout: boot.ProgressTimeout, MaxSectionBytes: boot.MaxSectionBytes, MaxEndpoints: boot.MaxEndpoints}
		}
		sources = append(sources, peers)
	}
	if cfg.Path != "" {
		sources = append(sources, FileSource{Path: cfg.Path, MaxSectionBytes: boot.MaxSectionBytes, MaxEndpoints: boot.MaxEndpoints})
	}
	sources = append(sources, opts.Sources...)
	timeout := boot.Timeout
	if timeout == 0 {
		timeout = DefaultBootstrapTimeout
	}
	loaded, err := k.restore(ctx, ix, sources, timeout)
	if err != nil {
		opts.Unregister(met.collectors()...)
		release()
		return nil, err
	}
	k.restored.Store(&loaded)
	return k, nil
}

// Start launches the periodic checkpoint writer (when a path is set and
// the interval is not negative) and arms the last write of Close. A router
// calls it once it has started: one whose start failed never overwrites a
// checkpoint. With a path set it first removes the temporary files that a
// write interrupted by a crash left beside the checkpoint file.
func (k *Keeper) Start() {
	k.live = true
	if k.cfg.Path == "" {
		return
	}
	// This process writes the file from now on: what an earlier one left
	// mid-write is garbage.
	if n, err := removeLeftoverTemps(k.cfg.Path); err != nil {
		k.log.Warn("Could not remove the temporary files of an interrupted checkpoint write", "path", k.cfg.Path, "removed", n, "err", err)
	} else if n > 0 {
		k.log.Info("Removed the temporary files of an interrupted checkpoint write", "path", k.cfg.Path, "removed", n)
	}
	iv := k.cfg.Interval
	if iv == 0 {
		iv = DefaultInterval
	}
	if iv < 0 {
		return
	}
	k.stop, k.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(k.done)
		t := k.set.Clk().NewTicker(iv)
		defer t.Stop()
		for {
			select {
			case <-k.stop:
				return
			case <-t.C():
				_ = k.Write()
			}
		}
	}()
}

// Close stops the periodic writer, writes the last checkpoint when Start
// was called (stop the event subscriptions first, so that it holds every
// applied event), releases the checkpoint path for the next router and
// unregisters the metrics. Later calls write nothing.
func (k *Keeper) Close() {
	if k.stop != nil {
		close(k.stop)
		<-k.done
		k.stop = nil
	}
	if k.live && k.cfg.Path != "" {
		_ = k.Write()
	}
	k.live = false
	k.mu.Lock()
	k.closed = true // a later Write would no longer hold the path
	if k.claim != nil {
		_ = k.claim.Close() // after the last write: the next router reads it whole
		k.claim = nil
	}
	k.mu.Unlock()
	k.set.Unregister(k.met.collectors()...)
}

// errNoPath is Write without a checkpoint file.
var errNoPath = errors.New("kvroute: no checkpoint path configured")

// errClosed is Write after Close: the path is released, and may already
// belong to the next router, whose checkpoint the write would replace.
var errClosed = errors.New("kvroute: checkpoint keeper closed; its path is released")

// Write writes the index to the checkpoint file now, atomically (as the
// periodic writer does). It fails when no path is configured or the write
// fails; the previous checkpoint is then kept. When only the directory sync
// after the rename fails, the new checkpoint is in place but a crash may
// bring back the previous one: Write returns that error, and counts and
// logs the write as not durable rather than as failed. After Close it
// writes nothing and fails: the path is released to the next router.
func (k *Keeper) Write() error {
	if k.cfg.Path == "" {
		return errNoPath
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return errClosed
	}
	start := time.Now()
	info, err := writeFileAtomic(k.cfg.Path, k.ix)
	if errors.Is(err, errNotDurable) {
		k.met.writes.WithLabelValues("not_durable").Inc()
		k.met.bytes.Set(float64(info.Bytes))
		k.log.Error("Checkpoint written, but the directory sync after its rename failed; the new checkpoint is in place, but a crash may bring back the previous one",
			"path", k.cfg.Path, "err", err)
		return err
	}
	if err != nil {
		k.met.writes.WithLabelValues("error").Inc()
		k.log.Error("Checkpoint write failed; the previous checkpoint is kept", "path", k.cfg.Path, "err", err)
		return err
	}
	k.met.writes.WithLabelValues("ok").Inc()
	k.met.lastWrite.SetToCurrentTime()
	k.met.bytes.Set(float64(info.Bytes))
	k.log.Debug("Checkpoint written", "path", k.cfg.Path, "endpoints", len(info.Endpoints),
		"memberships", info.Memberships, "bytes", info.Bytes, "elapsed", time.Since(start))
	return nil
}

// DropUnlisted clears the restored endpoints for which listed is false:
// call it with the first endpoint list, since no event subscription will
// ever update or remove the entries and positions of an endpoint the list
// does not name. Later calls do nothing and return at once, even while a
// checkpoint is being written; a write racing the first call holds each
// restored endpoint whole or not at all.
func (k *Keeper) DropUnlisted(listed func(endpoint string) bool) {
	restored := k.restored.Swap(nil)
	if restored == nil {
		return
	}
	for name := range *restored {
		if listed(name) {
			continue
		}
		pl := k.ix.LockPosition(name)
		removed := k.ix.Clear(name)
		pl.Clear()
		pl.Unlock()
		k.ix.ForgetPosition(name)
		k.log.Info("Restored endpoint is not in the endpoint list; cleared", "endpoint", name, "memberships", removed)
	}
}
