package kvroute

import (
	"errors"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute/internal/labelselector"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// subscriptions keep the router's KV-event subscriber pool in step with its
// endpoint list: each endpoint given to SetEndpoints is subscribed (the
// pool's selector decides which actually are), each removed one
// unsubscribed and cleared from the index.
type subscriptions struct {
	pool  *kvevents.Pool
	model string

	mu    sync.Mutex
	known map[string]struct{}
}

// newSubscriptions builds the KV-event subscriber pool that feeds ix.
// Every endpoint's topic model goes to observe (see kvevents.TopicObserver).
// clock (Options.Clock; nil is the wall clock) is the pool's clock too, so
// that the readiness states it records begin on the router's clock.
func newSubscriptions(cfg Config, ix *kvindex.Index, reg prometheus.Registerer, log *slog.Logger, observe kvevents.TopicObserver, match func(map[string]string) bool, tp trace.TracerProvider, clock telemetry.Clock) (*subscriptions, error) {
	pc := cfg.Events.PoolConfig
	pc.Model = cfg.Model
	pc.Replay = *cfg.Events.Replay
	pc.TopicFilter = *cfg.Events.TopicFilter
	if cfg.Events.Selector != "" {
		if match != nil {
			return nil, errors.New("set either Config.Events.Selector or Options.EventSelector, not both")
		}
		sel, err := labelselector.Parse(cfg.Events.Selector)
		if err != nil {
			return nil, err
		}
		match = sel.Matches
	}
	p, err := kvevents.NewPool(pc, ix, kvevents.Options{Set: telemetry.Set{Registerer: reg, Logger: log, TracerProvider: tp, Clock: clock}, Matcher: match})
	if err != nil {
		return nil, err
	}
	p.ObserveTopics(observe)
	return &subscriptions{pool: p, model: cfg.Model, known: map[string]struct{}{}}, nil
}

// setEndpoints subscribes to every endpoint of eps (the pool's selector
// decides which are actually subscribed) and unsubscribes, clearing their
// index entries, the endpoints that are gone.
func (s *subscriptions) setEndpoints(eps []Endpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]struct{}, len(eps))
	var errs []error
	for _, e := range eps {
		next[e.ID] = struct{}{}
		// With Config.Model set, events are keyed by it, exactly as requests
		// without a model are; it also lets the pool replay an idle engine as
		// soon as it is subscribed. An endpoint listing other Models keys
		// them under its topic's model when the topic names one of them.
		if err := s.pool.Ensure(kvevents.Endpoint{ID: e.ID, Model: e.eventModel(s.model), Models: e.Models, Labels: e.Labels,
			EventsAddress: e.EventsAddress, ReplayAddress: e.ReplayAddress, SnapshotAddress: e.SnapshotAddress, Rank: e.Rank}); err != nil {
			errs = append(errs, err)
		}
	}
	for id := range s.known {
		if _, ok := next[id]; !ok {
			s.pool.Remove(id)
		}
	}
	s.known = next
	return errors.Join(errs...)
}

// close stops the pool's subscribers.
func (s *subscriptions) close() { _ = s.pool.Close() }

// eventPool returns the subscriber pool, for its status and statistics.
func (s *subscriptions) eventPool() *kvevents.Pool { return s.pool }
