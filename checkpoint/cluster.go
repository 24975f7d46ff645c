package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/kvindex"
)

// ClusterPeerSource bootstraps the index from a live replica of a router's
// Redis pool: it lists the pool's members that advertise a snapshot URL
// (their cluster.Config.SnapshotURL) and loads the first that delivers a
// valid snapshot, racing them as the configured peers are (see
// BootstrapConfig.Peers) and validating each exactly as PeerSource does.
// Restore uses it when Options.Cluster is enabled and BootstrapConfig.Peers
// is empty, so that a new replica of an active-active pool starts with a
// complete index.
type ClusterPeerSource struct {
	Cluster cluster.Config
	// Token is the secret the peers' snapshot handlers require, proved to
	// each as PeerSource.Token is, never sent itself.
	Token string
	// ProgressTimeout abandons a replica that sends nothing for this long
	// (0: DefaultBootstrapProgressTimeout).
	ProgressTimeout time.Duration
	// MaxSectionBytes bounds one endpoint section (0: the kvindex default).
	MaxSectionBytes int64
	// MaxEndpoints bounds the endpoint sections (0: the kvindex default).
	MaxEndpoints int
}

// Kind returns "cluster_peer".
func (s ClusterPeerSource) Kind() string { return "cluster_peer" }

// String names the pool.
func (s ClusterPeerSource) String() string {
	return "live replicas of pool " + s.Cluster.WithDefaults().Pool
}

// errPoolUnreachable is the pool's Redis not answering the listing of its
// replicas: counted as result "redis_unreachable", not "missing", so that
// an outage does not pass for a pool with no live replica. Like
// ErrNoSnapshot it is no failure of Restore, which goes on to the next
// source.
var errPoolUnreachable = errors.New("kvroute: the pool's Redis did not answer")

// Load lists the live peers and loads the first valid snapshot among them;
// no live peer with a snapshot URL is ErrNoSnapshot, and Redis not
// answering the listing an error counted as "redis_unreachable".
func (s ClusterPeerSource) Load(ctx context.Context, ix *kvindex.Index) (kvindex.SnapshotInfo, error) {
	return s.loadPeers(ctx, ix, 0, nil)
}

func (s ClusterPeerSource) loadPeers(ctx context.Context, ix *kvindex.Index, timeout time.Duration, report peerReport) (kvindex.SnapshotInfo, error) {
	peers, skipped, err := cluster.LivePeers(ctx, s.Cluster)
	if err != nil {
		if ctx.Err() != nil {
			return kvindex.SnapshotInfo{}, fmt.Errorf("kvroute: listing the pool's replicas: %w", context.Cause(ctx))
		}
		// Not ErrNoSnapshot: an outage is no empty pool (see errPoolUnreachable).
		return kvindex.SnapshotInfo{}, fmt.Errorf("%w (%s): listing the pool's replicas: %w", errPoolUnreachable, s.Cluster.Addrs, err)
	}
	if len(peers) == 0 {
		return kvindex.SnapshotInfo{}, fmt.Errorf("%w: no live replica of the pool advertises a snapshot (members passed over: %v)", ErrNoSnapshot, skipped)
	}
	srcs := make([]PeerSource, len(peers))
	for i, p := range peers {
		srcs[i] = PeerSource{URL: p.SnapshotURL, Token: s.Token, ProgressTimeout: s.ProgressTimeout, MaxSectionBytes: s.MaxSectionBytes, MaxEndpoints: s.MaxEndpoints}
	}
	return racePeers(ctx, ix, srcs, timeout, report)
}
