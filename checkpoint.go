package kvroute

import (
	"context"
	"fmt"
	"net/http"

	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/telemetry"
)

// restoreIndex fills the Router's freshly created index from the
// configured sources (package checkpoint: the pool's live replicas or
// Config.Bootstrap's peers, the checkpoint file, Options.IndexSources) and
// keeps the Keeper that later writes the checkpoint and serves the
// snapshot. Ending ctx abandons the restore.
func (r *Router) restoreIndex(ctx context.Context, cfg Config, opts Options) error {
	k, err := checkpoint.Restore(ctx, r.index, cfg.Checkpoint, cfg.Bootstrap, checkpoint.Options{
		Set:     telemetry.Set{Registerer: opts.Registerer, Logger: r.log, Clock: opts.Clock},
		Cluster: cfg.Cluster,
		Sources: opts.IndexSources,
	})
	if err != nil {
		return err
	}
	r.snap = k
	return nil
}

// Checkpoint writes the checkpoint file now (as the periodic writer does).
// It fails when no checkpoint path is configured or the write fails; the
// previous checkpoint is then kept, except when only the directory sync
// after the rename failed: the new checkpoint is then in place, but a
// crash may bring back the previous one (see checkpoint.Keeper.Write).
func (r *Router) Checkpoint() error {
	if r.snap == nil || r.cfg.Checkpoint.Path == "" {
		return fmt.Errorf("%w: no checkpoint path configured", ErrInvalidConfig)
	}
	return r.snap.Write()
}

// SnapshotHandler serves the Router's index snapshot to peer replicas that
// bootstrap from it (Config.Bootstrap.Peers); see checkpoint.Keeper.Handler.
// With Config.Bootstrap.Token set, a request must prove the token, bound
// to this replica's advertised snapshot URL (Config.Cluster.SnapshotURL)
// and the time, as a peer's bootstrap does; the token itself never
// travels. Mount it on an internal port only (not
// the gateway's public listener): the snapshot reveals which prefixes every
// engine caches, and serving one costs a pass over the index.
func (r *Router) SnapshotHandler() http.Handler { return r.snap.Handler() }
