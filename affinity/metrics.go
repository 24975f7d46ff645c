package affinity

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// DecisionsMetric is the name of the decision counter, the same as the llm-d
// router's so that dashboards and alerts carry over.
const DecisionsMetric = "llm_d_epp_prefix_cache_affinity_filter_decisions_total"

// decisionCounters counts, per decision counter a Filter registered, the
// Filters using it: the registrant and those that found it registered and
// reused it. It stays registered until the last of them closes, whichever
// that is. The lock is held across registering and unregistering, so a
// Filter never reuses a counter that is being unregistered.
var decisionCounters struct {
	sync.Mutex
	users map[*prometheus.CounterVec]*counterUsers
}

// counterUsers is one registered decision counter's users.
type counterUsers struct {
	set telemetry.Set // the registrant's, through which it is unregistered
	n   int
}

// decisionCounter builds the decision counter and registers it through set
// (nothing without a registerer). When an identical counter is already
// registered (several filters, e.g. a strict and a loose one, sharing one
// registry) the existing one is reused. shared is true when the counter is
// a Filter's, registered here or reused: the caller then releases it with
// releaseDecisionCounter when it closes. A counter registered other than by
// a Filter is reused and stays its registrant's.
func decisionCounter(set telemetry.Set) (vec *prometheus.CounterVec, shared bool, err error) {
	vec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: DecisionsMetric,
		Help: "Prefix-cache affinity filter decisions by outcome (sticky, no_match, load_override, request_load_override, exploration, not_applicable, missing_signal, crowded).",
	}, []string{"outcome"})
	if set.Registerer == nil {
		return vec, false, nil
	}
	decisionCounters.Lock()
	defer decisionCounters.Unlock()
	if err := set.Register(vec); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				u := decisionCounters.users[existing]
				if u != nil {
					u.n++
				}
				return existing, u != nil, nil
			}
		}
		return nil, false, fmt.Errorf("affinity: register %s: %w", DecisionsMetric, err)
	}
	if decisionCounters.users == nil {
		decisionCounters.users = make(map[*prometheus.CounterVec]*counterUsers)
	}
	decisionCounters.users[vec] = &counterUsers{set: set, n: 1}
	return vec, true, nil
}

// releaseDecisionCounter ends one Filter's use of a counter decisionCounter
// returned as shared, and unregisters it when that Filter was its last
// user.
func releaseDecisionCounter(vec *prometheus.CounterVec) {
	decisionCounters.Lock()
	defer decisionCounters.Unlock()
	u := decisionCounters.users[vec]
	if u == nil {
		return
	}
	if u.n--; u.n == 0 {
		delete(decisionCounters.users, vec)
		u.set.Unregister(vec)
	}
}
