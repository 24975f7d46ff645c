package kvroute

import (
	"fmt"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricLabelsConfig adds constant labels to the metrics whose llm-d
// counterparts carry plugin labels, so that dashboards and alerts that
// select on them (for instance plugin_name="precise-prefix-cache-producer")
// match kvroute's series unchanged. Each map is set once in the
// configuration; empty maps add nothing. Label names must be valid
// Prometheus names and must not collide with the metrics' own labels.
type MetricLabelsConfig struct {
	// Render labels the render client's metrics
	// (llm_d_epp_token_producer_render_duration_seconds and
	// _render_failures_total), which in llm-d carry plugin_type,
	// plugin_name and backend.
	Render map[string]string `json:"render"`
	// Affinity labels llm_d_epp_prefix_cache_affinity_filter_decisions_total,
	// which in llm-d carries plugin_name.
	Affinity map[string]string `json:"affinity"`
	// Prediction labels llm_d_epp_prefix_predicted_cached_tokens and
	// llm_d_epp_prefix_prompt_tokens, which in llm-d carry plugin_name and
	// plugin_type.
	Prediction map[string]string `json:"prediction"`
}

// labelName is the classic Prometheus label name syntax (no UTF-8 names:
// dashboards quote them differently).
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// reserved are the labels kvroute's own series already use.
var reserved = map[string]bool{"result": true, "reason": true, "outcome": true, "endpoint_role": true}

// Validate reports the first invalid label.
func (c MetricLabelsConfig) Validate() error {
	for part, m := range map[string]map[string]string{"render": c.Render, "affinity": c.Affinity, "prediction": c.Prediction} {
		for k := range m {
			if !labelName.MatchString(k) || reserved[k] || len(k) > 1 && k[:2] == "__" {
				return fmt.Errorf("%w: metricLabels.%s: label name %q is invalid or reserved", ErrInvalidConfig, part, k)
			}
		}
	}
	return nil
}

// wrap returns reg with labels added to everything registered through it
// (reg itself when there are none or reg is nil).
func wrap(reg prometheus.Registerer, labels map[string]string) prometheus.Registerer {
	if reg == nil || len(labels) == 0 {
		return reg
	}
	return prometheus.WrapRegistererWith(prometheus.Labels(labels), reg)
}
