package kvroute

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/kvindex"
)

// ClusterPeerSource bootstraps the index from a live replica of the Router's
// Redis pool: it lists the pool's members that advertise a snapshot URL
// (their Config.Cluster.SnapshotURL) and loads the first that delivers a
// valid snapshot, exactly as PeerSource does for a configured URL. A Router
// with Config.Cluster set and no Config.Bootstrap.Peers uses it, so that a
// new replica of an active-active pool starts with a complete index.
type ClusterPeerSource struct {
	Cluster cluster.Config
	// Token is the bearer token the peers' snapshot handlers require.
	Token string
}

// Kind returns "cluster_peer".
func (s ClusterPeerSource) Kind() string { return "cluster_peer" }

// String names the pool.
func (s ClusterPeerSource) String() string {
	return "live replicas of pool " + s.Cluster.WithDefaults().Pool
}

// Load lists the live peers and loads the first valid snapshot among them;
// no live peer with a snapshot URL is ErrNoSnapshot.
func (s ClusterPeerSource) Load(ctx context.Context, ix *kvindex.Index) (kvindex.SnapshotInfo, error) {
	peers, err := cluster.LivePeers(ctx, s.Cluster)
	if err != nil {
		return kvindex.SnapshotInfo{}, fmt.Errorf("%w: listing the pool's replicas: %v", ErrNoSnapshot, err)
	}
	if len(peers) == 0 {
		return kvindex.SnapshotInfo{}, fmt.Errorf("%w: no live replica of the pool advertises a snapshot", ErrNoSnapshot)
	}
	var errs []string
	for _, p := range peers {
		info, err := PeerSource{URL: p.SnapshotURL, Token: s.Token}.Load(ctx, ix)
		if err == nil {
			return info, nil
		}
		errs = append(errs, p.ID+": "+err.Error())
		if ctx.Err() != nil {
			break
		}
	}
	return kvindex.SnapshotInfo{}, errors.New("kvroute: no replica of the pool delivered a valid snapshot: " + strings.Join(errs, "; "))
}
