package affinity

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// DecisionsMetric is the name of the decision counter, the same as the llm-d
// router's so that dashboards and alerts carry over.
const DecisionsMetric = "llm_d_epp_prefix_cache_affinity_filter_decisions_total"

// decisionCounter builds the decision counter and registers it with reg when
// reg is non-nil. When an identical counter is already registered (several
// filters, e.g. a strict and a loose one, sharing one registry) the existing
// one is reused.
func decisionCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: DecisionsMetric,
		Help: "Prefix-cache affinity filter decisions by outcome (sticky, no_match, load_override, request_load_override, exploration, not_applicable, missing_signal).",
	}, []string{"outcome"})
	if reg == nil {
		return vec, nil
	}
	if err := reg.Register(vec); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, nil
			}
		}
		return nil, fmt.Errorf("affinity: register %s: %w", DecisionsMetric, err)
	}
	return vec, nil
}
