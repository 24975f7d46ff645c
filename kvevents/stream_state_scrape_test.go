package kvevents

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
)

// scrapedEndpoints gathers reg and returns the endpoints that have a
// kvroute_kv_events_stream_state series.
func scrapedEndpoints(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_kv_events_stream_state" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pod_identifier" {
					ids[l.GetValue()] = true
				}
			}
		}
	}
	return ids
}

// An endpoint replaced by another (Ensure of the new one, then Remove of
// the old, and back) always has one of the two in the pool, and endpoints
// no one touches are always there: every scrape of the state collector
// shows them, since it reads the streams in one pass as Pool.Statuses does.
// Before, it listed the IDs and then read each one's state, so a swap in
// between showed neither of the pair.
func TestStateCollectorScrapeDuringEndpointSwapMissesNone(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pub.Close()
	p, _ := newTestPool(t, PoolConfig{}, newPoolIndex(t))
	defer p.Close()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(NewStateCollector(p, nil)))
	ep := func(id string) Endpoint { return Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint()} }
	// Many untouched endpoints sort before the pair, so a scrape reads
	// them between listing the pair and reading it.
	var stable []string
	for i := range 40 {
		id := fmt.Sprintf("10.0.0.1:%d", 8000+i)
		stable = append(stable, id)
		require.NoError(t, p.Ensure(ep(id)))
	}
	const one, other = "10.0.0.9:8000", "10.0.0.9:8001"
	require.NoError(t, p.Ensure(ep(one)))

	const swaps = 500
	done := make(chan error, 1)
	go func() {
		for range swaps {
			for _, ids := range [][2]string{{other, one}, {one, other}} {
				if err := p.Ensure(ep(ids[0])); err != nil {
					done <- err
					return
				}
				p.Remove(ids[1])
			}
		}
		done <- nil
	}()
	scrapes := 0
	for {
		select {
		case err := <-done:
			require.NoError(t, err)
			require.Positive(t, scrapes)
			require.NoError(t, p.Close())
			return
		default:
		}
		ids := scrapedEndpoints(t, reg)
		scrapes++
		require.True(t, ids[one] || ids[other], "scrape %d shows neither %s nor %s", scrapes, one, other)
		for _, id := range stable {
			require.True(t, ids[id], "scrape %d misses %s", scrapes, id)
		}
	}
}
