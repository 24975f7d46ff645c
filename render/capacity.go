package render

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// endpointState is what the Client knows of one render endpoint's load: its
// concurrency gate, its recent attempt latency (for hedging) and its recent
// queue wait. It lives as long as the endpoint stays in the snapshot, and
// after it leaves as long as its gate is busy (picker.set).
type endpointState struct {
	gate      gate
	latency   quantileTracker
	queueWait ewma
	// notEnabled holds, by route, the Client clock's unix nanoseconds until
	// which the route is passed over because the endpoint answered it with
	// a bare 404 (ErrRenderNotEnabled); 0: never.
	notEnabled [numRoutes]atomic.Int64
}

// notEnabledBench is how long an endpoint whose render route answered a
// bare 404 (its render routes not registered: vLLM without
// --enable-scale-out) is passed over for that route. A renderer that gains
// its routes does so by a restart, which takes longer than this anyway.
const notEnabledBench = 30 * time.Second

// benched reports whether route r of the endpoint is passed over at now
// (unix nanoseconds on the Client's clock).
func (s *endpointState) benched(r route, now int64) bool {
	return now < s.notEnabled[r].Load()
}

// bench passes route r of the endpoint over until notEnabledBench after now.
func (s *endpointState) bench(r route, now int64) {
	s.notEnabled[r].Store(now + int64(notEnabledBench))
}

// idle reports whether no render holds or waits for a slot of the endpoint.
func (s *endpointState) idle() bool {
	inFlight, queued := s.gate.load()
	return inFlight == 0 && queued == 0
}

// Capacity is one render endpoint's load as the Client sees it: how close
// the endpoint is to its concurrency limit and how long renders recently
// waited for it. It is a saturation signal for a host or an admission stage
// (a render that cannot start within Config.MaxQueueWait makes its request
// route by load, without cache information).
type Capacity struct {
	// InFlight is the number of renders holding a slot on the endpoint.
	InFlight int
	// Limit is Config.MaxConcurrency; 0 means no limit.
	Limit int
	// Queued is the number of renders waiting for a slot.
	Queued int
	// QueueWait is the recent wait for a slot (a moving average over about
	// the last 8 renders sent to the endpoint, 0 for those that found one
	// free at once).
	QueueWait time.Duration
	// P95 is the recent 95th percentile of the endpoint's render attempts,
	// the hedging threshold; 0 before the first sample.
	P95 time.Duration
}

// Saturated reports whether a new render would have to wait: a limit is set
// and every slot is taken.
func (c Capacity) Saturated() bool { return c.Limit > 0 && c.InFlight >= c.Limit }

// Capacity returns the load of the render endpoint with the given ID (the
// fixed URL's, under the URL as ID), and false when the Client has no such
// endpoint. It takes one lock of the endpoint's gate and allocates nothing.
func (c *Client) Capacity(endpointID string) (Capacity, bool) {
	t := c.picker.lookup(endpointID)
	if t == nil {
		return Capacity{}, false
	}
	return t.st.capacity(), true
}

func (s *endpointState) capacity() Capacity {
	inFlight, queued := s.gate.load()
	p95, _ := s.latency.value()
	return Capacity{InFlight: inFlight, Limit: s.gate.limit, Queued: queued, QueueWait: s.queueWait.value(), P95: p95}
}

// Capacity metric names (kvroute's own; the llm-d token producer has no
// concurrency limit).
const (
	metricInFlight      = "kvroute_render_in_flight"
	metricQueued        = "kvroute_render_queued"
	metricLimit         = "kvroute_render_concurrency_limit"
	metricQueueWaitNow  = "kvroute_render_queue_wait_recent_seconds"
	metricP95           = "kvroute_render_latency_p95_seconds"
	metricQueueWait     = "kvroute_render_queue_wait_seconds"
	metricQueueRejected = "kvroute_render_queue_rejections_total"
	metricHedges        = "kvroute_render_hedges_total"
	metricHedgeLosers   = "kvroute_render_hedge_losers_total"
	metricConnsDialed   = "kvroute_render_connections_dialed_total"
	metricConnsClosed   = "kvroute_render_connections_closed_total"
	metricAttemptFails  = "kvroute_render_attempt_failures_total"
	metricNotEnabled    = "kvroute_render_not_enabled_total"
)

// capacityCollector exports every current endpoint's Capacity at scrape
// time, so that an endpoint that leaves the snapshot leaves the metrics with
// it and the render path updates no gauges.
type capacityCollector struct {
	c                                  *Client
	inFlight, queued, limit, wait, p95 *prometheus.Desc
}

func newCapacityCollector(c *Client) *capacityCollector {
	ep := []string{"endpoint"}
	return &capacityCollector{
		c:        c,
		inFlight: prometheus.NewDesc(metricInFlight, "Renders in flight to each render endpoint (holding one of its Config.MaxConcurrency slots).", ep, nil),
		queued:   prometheus.NewDesc(metricQueued, "Renders waiting for a slot on each render endpoint.", ep, nil),
		limit:    prometheus.NewDesc(metricLimit, "Render slots per endpoint (render Config.MaxConcurrency; 0 means no limit).", ep, nil),
		wait:     prometheus.NewDesc(metricQueueWaitNow, "Recent wait for a render slot on each render endpoint (moving average over about 8 renders).", ep, nil),
		p95:      prometheus.NewDesc(metricP95, "Recent 95th-percentile render attempt latency of each render endpoint, the hedging threshold.", ep, nil),
	}
}

// Describe implements prometheus.Collector.
func (cc *capacityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cc.inFlight
	ch <- cc.queued
	ch <- cc.limit
	ch <- cc.wait
	ch <- cc.p95
}

// Collect implements prometheus.Collector.
func (cc *capacityCollector) Collect(ch chan<- prometheus.Metric) {
	var ts []*target
	if p := &cc.c.picker; p.fixed != nil {
		ts = []*target{p.fixed}
	} else if s := p.snap.Load(); s != nil {
		ts = *s
	}
	for _, t := range ts {
		c := t.st.capacity()
		ch <- prometheus.MustNewConstMetric(cc.inFlight, prometheus.GaugeValue, float64(c.InFlight), t.id)
		ch <- prometheus.MustNewConstMetric(cc.queued, prometheus.GaugeValue, float64(c.Queued), t.id)
		ch <- prometheus.MustNewConstMetric(cc.limit, prometheus.GaugeValue, float64(c.Limit), t.id)
		ch <- prometheus.MustNewConstMetric(cc.wait, prometheus.GaugeValue, c.QueueWait.Seconds(), t.id)
		ch <- prometheus.MustNewConstMetric(cc.p95, prometheus.GaugeValue, c.P95.Seconds(), t.id)
	}
}
