package affinity

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// DecisionsMetric is the name of the decision counter, the same as the llm-d
// router's so that dashboards and alerts carry over.
const DecisionsMetric = "llm_d_epp_prefix_cache_affinity_filter_decisions_total"

// decisionCounter builds the decision counter and registers it through set
// (nothing without a registerer). When an identical counter is already
// registered (several filters, e.g. a strict and a loose one, sharing one
// registry) the existing one is reused and owned is false: it stays its
// registrant's. owned is true when this call registered vec itself.
func decisionCounter(set telemetry.Set) (vec *prometheus.CounterVec, owned bool, err error) {
	vec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: DecisionsMetric,
		Help: "Prefix-cache affinity filter decisions by outcome (sticky, no_match, load_override, request_load_override, exploration, not_applicable, missing_signal, crowded).",
	}, []string{"outcome"})
	if err := set.Register(vec); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, false, nil
			}
		}
		return nil, false, fmt.Errorf("affinity: register %s: %w", DecisionsMetric, err)
	}
	return vec, set.Registerer != nil, nil
}
