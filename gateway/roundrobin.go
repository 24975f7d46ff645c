package gateway

import (
	"context"
	"sync/atomic"

	"github.com/kvroute/kvroute"
)

// RoundRobin is a cache-blind kvroute.Picker that hands requests to the
// candidates in turn. It neither renders nor keeps load, so its Decisions'
// FirstChunk and Done do nothing; it exists to compare precise routing with
// what a plain load balancer does.
type RoundRobin struct {
	next atomic.Uint64
}

// Pick returns the next candidate in turn.
func (rr *RoundRobin) Pick(ctx context.Context, _ *kvroute.Request, endpoints []kvroute.Endpoint) (*kvroute.Decision, error) {
	if len(endpoints) == 0 {
		return nil, kvroute.ErrNoEndpoints
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	i := (rr.next.Add(1) - 1) % uint64(len(endpoints))
	return &kvroute.Decision{Endpoint: endpoints[i]}, nil
}
