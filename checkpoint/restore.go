package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvroute/kvroute/kvindex"
)

// restoreResult is the label "result" of kvroute_index_restore_total for
// an outcome of one source or peer.
func restoreResult(err error) string {
	var se *kvindex.SnapshotError
	switch {
	case err == nil:
		return "loaded"
	case errors.Is(err, errPoolUnreachable):
		return "redis_unreachable"
	case errors.Is(err, ErrNoSnapshot):
		return "missing"
	case errors.Is(err, errPeerStalled), errors.Is(err, context.DeadlineExceeded):
		return "timeout" // before the reasons: a read cut by a deadline is a read_error
	case errors.As(err, &se):
		return se.Reason
	case errors.Is(err, errPeerBusy):
		return "busy"
	case errors.Is(err, errPeerStatus):
		return "refused"
	}
	return "unreachable"
}

// restore tries the sources in order and keeps the first that loads; the
// peers of one source (the configured peers, a pool's live replicas) are
// raced (see racePeers). timeout bounds one file's load or one peer's
// transfer. Every outcome is logged and counted, per peer; when none
// loads the index stays empty. It returns the endpoints loaded, or ctx's
// error as soon as ctx ends before a source has loaded.
func (k *Keeper) restore(ctx context.Context, ix *kvindex.Index, sources []IndexSource, timeout time.Duration) (map[string]struct{}, error) {
	ctx = withClock(ctx, k.set.Clk()) // the peer races' hedge and stall watches
	for _, src := range sources {
		start := time.Now()
		var info kvindex.SnapshotInfo
		var err error
		if ps, ok := src.(peerSources); ok {
			info, err = ps.loadPeers(ctx, ix, timeout, func(p PeerSource, info kvindex.SnapshotInfo, err error, elapsed time.Duration) {
				k.outcome(src.Kind(), p.URL, info, err, elapsed)
			})
			if err != nil && (errors.Is(err, ErrNoSnapshot) || errors.Is(err, errPoolUnreachable)) { // no peer was asked: the source's own outcome
				k.outcome(src.Kind(), src.String(), info, err, time.Since(start))
			}
		} else {
			lctx, cancel := context.WithTimeout(ctx, timeout)
			info, err = src.Load(lctx, ix)
			cancel()
			if err == nil || ctx.Err() == nil {
				k.outcome(src.Kind(), src.String(), info, err, time.Since(start))
			}
		}
		if err == nil {
			loaded := make(map[string]struct{}, len(info.Endpoints))
			for _, e := range info.Endpoints {
				loaded[e.Name] = struct{}{}
			}
			return loaded, nil
		}
		if ctx.Err() != nil {
			k.log.Warn("Index restore canceled; starting no further", "source", src.Kind(), "from", src.String(), "err", context.Cause(ctx))
			return nil, fmt.Errorf("kvroute: restoring the index: %w", context.Cause(ctx))
		}
	}
	return nil, nil
}

// outcome logs and counts the outcome of loading from one source or peer.
func (k *Keeper) outcome(kind, from string, info kvindex.SnapshotInfo, err error, elapsed time.Duration) {
	result := restoreResult(err)
	k.met.restores.WithLabelValues(kind, result).Inc()
	switch {
	case err == nil:
		k.log.Info("Index restored", "source", kind, "from", from,
			"endpoints", len(info.Endpoints), "memberships", info.Memberships, "bytes", info.Bytes,
			"elapsed", elapsed)
		k.met.restoredMemberships.Set(float64(info.Memberships))
	case errors.Is(err, errPoolUnreachable):
		k.log.Warn("The pool's Redis did not answer; its replicas' snapshots not tried", "source", kind, "from", from, "err", err)
	case errors.Is(err, ErrNoSnapshot):
		k.log.Info("No index snapshot to restore", "source", kind, "from", from, "reason", err.Error())
	default:
		k.log.Error("Index snapshot refused; not loaded", "source", kind, "from", from,
			"result", result, "elapsed", elapsed, "err", err)
	}
}
