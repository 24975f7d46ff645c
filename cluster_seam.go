package kvroute

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/clusterseam"
)

// The routing simulation runs Routers as replicas of one pool whose shared
// state is an in-process, virtual-time store instead of Redis; this attaches
// such a replica to a Router (see internal/clusterseam). No exported API
// reaches it.
func init() {
	clusterseam.AttachManual = func(router any, cfg any, store clusterseam.Store, now func() time.Time) (clusterseam.Manual, error) {
		r, ok := router.(*Router)
		if !ok {
			return nil, fmt.Errorf("kvroute: AttachManual takes a *kvroute.Router, not %T", router)
		}
		if r.cluster != nil {
			return nil, errors.New("kvroute: the router already belongs to a cluster")
		}
		rep, m, err := clusterseam.NewManual(cfg, r.index, r.load, store, now, r.cfg.Speculative.TTL)
		if err != nil {
			return nil, fmt.Errorf("kvroute: cluster: %w", err)
		}
		r.mu.Lock()
		r.cluster = rep.(*cluster.Replica)
		r.cluster.SetEndpoints(endpointIDs(r.endpoints)) // a router given its endpoints before it joined
		r.mu.Unlock()
		return m, nil
	}
}
