package kvroute

import (
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/telemetry"
)

// startCluster joins the pool of router replicas when cfg.Cluster names
// Redis servers: the replica then publishes this router's local load, adds
// the peers' load to what the filter and scorer see (through the load
// tracker, in memory), shares its routing decisions as speculative entries
// and lists its peers. The replica takes from its peers only the endpoints
// given to SetEndpoints (none before the first call). Without
// Config.Cluster.Addrs (and without Options.NewClusterReplica) it does
// nothing. The peers' decisions create speculative entries with the index's
// TTL, which is Config.Speculative.TTL.
func (r *Router) startCluster(cfg Config, opts Options) error {
	var rep *cluster.Replica
	var err error
	switch {
	case opts.NewClusterReplica != nil && cfg.Cluster.Enabled():
		return errors.New("kvroute: cluster: set either Config.Cluster.Addrs or Options.NewClusterReplica, not both")
	case opts.NewClusterReplica != nil:
		rep, err = opts.NewClusterReplica(r.index, r.load)
		if err == nil && rep == nil {
			err = errors.New("Options.NewClusterReplica returned no replica")
		}
	case cfg.Cluster.Enabled():
		rep, err = cluster.New(cfg.Cluster, r.index, r.load, cluster.Options{
			Set: telemetry.Set{Registerer: opts.Registerer, Logger: r.log},
		})
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("kvroute: cluster: %w", err)
	}
	r.cluster = rep
	return nil
}

// endpointIDs lists the IDs of an endpoint set: what the cluster replica
// accepts from its peers (Replica.SetEndpoints).
func endpointIDs(eps map[string]Endpoint) []string {
	ids := make([]string, 0, len(eps))
	for id := range eps {
		ids = append(ids, id)
	}
	return ids
}

// validateCluster checks the cluster section, with its defaults, whether
// Addrs is set or not: nothing of it runs without Addrs, but a mistake in
// its other keys is reported when the configuration is read, not first
// when an operator adds the addresses.
func validateCluster(c cluster.Config) error {
	return c.Validate() // reads the defaults without drawing a replica ID
}

// Cluster returns the router's replica membership, nil when Config.Cluster
// is not configured: its Peers and SnapshotURLs name the live replicas a new
// one bootstraps its index from, Degraded says whether routing runs on local
// state only.
func (r *Router) Cluster() *cluster.Replica { return r.cluster }
