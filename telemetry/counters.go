package telemetry

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Counter is a count a component keeps in an atomic of its own (and
// reports in its Stats), exported as a Prometheus counter by
// Set.RegisterCounters, so that the metric and the Stats never disagree.
type Counter struct {
	// Name is the metric's name; Help its help text.
	Name, Help string
	// Value is the count the metric reads on every scrape.
	Value *atomic.Uint64
}

// RegisterCounters registers each counter as a Prometheus counter that
// reads its Value, all or none (Register), and returns the collectors for
// the component's Close to pass to Unregister. Without a registerer it
// registers nothing and returns nil.
func (s Set) RegisterCounters(counters ...Counter) ([]prometheus.Collector, error) {
	if s.Registerer == nil {
		return nil, nil
	}
	cs := make([]prometheus.Collector, len(counters))
	for i, c := range counters {
		v := c.Value
		cs[i] = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.Name, Help: c.Help},
			func() float64 { return float64(v.Load()) })
	}
	if err := s.Register(cs...); err != nil {
		return nil, err
	}
	return cs, nil
}
