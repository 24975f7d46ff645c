package admission

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/cluster"
)

// Active-active replicas. Saturation is shared without anything here: with
// cluster sharing the Router's load tracker holds every replica's in-flight
// load, and the TokenDetector reads it. Queue depth is shared through the
// replicas' records: ShareQueues publishes this Controller's depth per band
// and sums the peers', and kvroute_admission_fleet_queue_size{priority}
// reports own + peers'. The dispatch decision stays per replica: a peer's
// queue names no endpoints, so holding back a lower band here for a peer's
// higher band could stall requests the peer's waiters do not compete with.

// ShareQueues shares the queue depth per priority band with the replica's
// peers (a Router's Cluster(); nil does nothing): the depths travel in the
// replica's periodic record, never on the request path, and the fleet's
// total per band (this Controller's and the live peers') is the gauge
// kvroute_admission_fleet_queue_size. Peers' bands this Controller does not
// have are ignored and counted by the replica, as are this Controller's bands
// a record leaves out (over 64 with requests waiting, or a priority beyond
// ±2^31). Close stops the sharing.
//
// A Controller shares with one replica: a call with the replica it already
// shares with does nothing, one with another replica returns an error (the
// first would otherwise go on publishing this Controller's depths after
// Close), and so does a call after Close (ErrClosed), which would otherwise
// take the replica's sharing from the Controller that replaced this one. A
// Controller that shares a replica another one shared takes it over: the
// other's Close then leaves the replica's sharing to it.
func (c *Controller) ShareQueues(rep *cluster.Replica) error {
	if rep == nil {
		return nil
	}
	c.shareMu.Lock()
	defer c.shareMu.Unlock()
	if c.closed.Load() {
		return fmt.Errorf("%w: queues not shared", ErrClosed)
	}
	if cur := c.fleet.rep.Load(); cur != nil {
		if cur == rep {
			return nil
		}
		return errors.New("admission: ShareQueues: the queues are already shared with another replica")
	}
	prios := make([]int, len(c.bands))
	for i, b := range c.bands {
		prios[i] = b.priority
	}
	c.fleet.rep.Store(rep)
	// The replica's refresh calls depths, which takes mu, under the
	// replica's lock, which this takes under shareMu: shareMu is never
	// taken under mu.
	c.stopShare = rep.ShareQueues(prios, c.depths)
	return nil
}

// depths appends the queue depth of every band, highest priority first.
func (c *Controller) depths(dst []cluster.QueueDepth) []cluster.QueueDepth {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.bands {
		dst = append(dst, cluster.QueueDepth{Priority: b.priority, Requests: int64(b.n)})
	}
	return dst
}

// stopSharing detaches the replica ShareQueues was given, if any, unless
// another Controller took it over since (the replica's stop leaves a later
// sharer alone). Close calls it once closed is set, so no ShareQueues
// attaches one after it.
func (c *Controller) stopSharing() {
	c.shareMu.Lock()
	defer c.shareMu.Unlock()
	if c.stopShare != nil {
		c.stopShare()
		c.stopShare = nil
	}
	c.fleet.rep.Store(nil)
}

// fleetGauge is kvroute_admission_fleet_queue_size: per configured band,
// the requests waiting here plus those the live peers last published.
type fleetGauge struct {
	c    *Controller
	desc *prometheus.Desc
	rep  atomic.Pointer[cluster.Replica] // the replica shared with, written under the Controller's shareMu; Collect reads it without
}

func newFleetGauge(c *Controller) *fleetGauge {
	return &fleetGauge{c: c, desc: prometheus.NewDesc("kvroute_admission_fleet_queue_size",
		"Requests waiting in the admission queues of every replica (this one and its live peers, as of their last records), by priority band; equals llm_d_epp_flow_control_queue_size without cluster sharing.",
		[]string{"priority"}, nil)}
}

// Describe implements prometheus.Collector.
func (g *fleetGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *fleetGauge) Collect(ch chan<- prometheus.Metric) {
	own := g.c.depths(nil)
	peers := g.rep.Load().PeerQueues(nil) // nil-safe
	for _, q := range own {
		n := q.Requests
		for _, p := range peers {
			if p.Priority == q.Priority {
				n += p.Requests
			}
		}
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(n), strconv.Itoa(q.Priority))
	}
}
