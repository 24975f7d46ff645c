package models

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// rewriteMetrics are the Table's counters.
type rewriteMetrics struct {
	registered
	rewrites *prometheus.CounterVec // kvroute_models_rewrites_total{model,target}
}

func newRewriteMetrics(reg prometheus.Registerer) (*rewriteMetrics, error) {
	m := &rewriteMetrics{rewrites: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_models_rewrites_total",
		Help: "Requests whose model was rewritten by the model-rewrite table and that were routed as the target, by the model sent and the target drawn (configured names only); a request refused after the draw (a target no endpoint serves, a pick or an admission that refuses it) is not.",
	}, []string{"model", "target"})}
	var err error
	m.rewrites, err = register(reg, m.rewrites, &m.registered)
	return m, err
}

// Poll failure reasons (the reason label of
// kvroute_models_poll_failures_total), a fixed set.
const (
	failConnect = "connect" // the call failed or timed out
	failStatus  = "status"  // the answer's status was not 200
	failDecode  = "decode"  // the body is not an OpenAI model list, is too large, or names no valid model
)

// pollMetrics are the Poller's metrics; the endpoint label takes IDs the
// Poller was given, never names from the wire.
type pollMetrics struct {
	registered
	polls    *prometheus.CounterVec // kvroute_models_polls_total{endpoint}
	failures *prometheus.CounterVec // kvroute_models_poll_failures_total{endpoint,reason}
	dropped  *prometheus.CounterVec // kvroute_models_names_dropped_total{endpoint}
	fields   *prometheus.CounterVec // kvroute_models_card_fields_dropped_total{endpoint}
	served   *prometheus.GaugeVec   // kvroute_models_served{endpoint}
	aliases  *prometheus.GaugeVec   // kvroute_models_unrewritten_aliases{endpoint}
}

func newPollMetrics(reg prometheus.Registerer) (*pollMetrics, error) {
	m := &pollMetrics{
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_models_polls_total",
			Help: "Successful reads of an endpoint's /v1/models.",
		}, []string{"endpoint"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_models_poll_failures_total",
			Help: "Failed reads of an endpoint's /v1/models by reason (connect, status, decode); the endpoint keeps the models of its last good answer.",
		}, []string{"endpoint", "reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_models_names_dropped_total",
			Help: "Model names an endpoint reported that were not kept: invalid, overlong, repeated (listed again in the same answer), or beyond the per-endpoint bound.",
		}, []string{"endpoint"}),
		fields: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_models_card_fields_dropped_total",
			Help: "Members of a kept model's /v1/models card left out (the gateway lists them as null): an owned_by or root that is not a string, over 1024 bytes or not printable UTF-8, a max_model_len that is not a positive integer.",
		}, []string{"endpoint"}),
		served: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kvroute_models_served",
			Help: "Models an endpoint serves, as last read from its /v1/models.",
		}, []string{"endpoint"}),
		aliases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kvroute_models_unrewritten_aliases",
			Help: "Names an endpoint's /v1/models lists as base models with the root of its first served model (vLLM's served-name aliases, one KV cache) that no rewrite maps to that model: requests for them are routed without cache information.",
		}, []string{"endpoint"}),
	}
	var err error
	if m.polls, err = register(reg, m.polls, &m.registered); err != nil {
		m.unregister()
		return nil, err
	}
	if m.failures, err = register(reg, m.failures, &m.registered); err != nil {
		m.unregister()
		return nil, err
	}
	if m.dropped, err = register(reg, m.dropped, &m.registered); err != nil {
		m.unregister()
		return nil, err
	}
	if m.fields, err = register(reg, m.fields, &m.registered); err != nil {
		m.unregister()
		return nil, err
	}
	if m.served, err = register(reg, m.served, &m.registered); err != nil {
		m.unregister()
		return nil, err
	}
	if m.aliases, err = register(reg, m.aliases, &m.registered); err != nil {
		m.unregister()
		return nil, err
	}
	return m, nil
}

// forget deletes an endpoint's series.
func (m *pollMetrics) forget(id string) {
	l := prometheus.Labels{"endpoint": id}
	m.polls.DeletePartialMatch(l)
	m.failures.DeletePartialMatch(l)
	m.dropped.DeletePartialMatch(l)
	m.fields.DeletePartialMatch(l)
	m.served.DeletePartialMatch(l)
	m.aliases.DeletePartialMatch(l)
}

// forgetAnswer deletes the gauges that describe an endpoint's last answer,
// dropped when its URL changed; its counters stay, as the endpoint does.
func (m *pollMetrics) forgetAnswer(id string) {
	m.served.DeleteLabelValues(id)
	m.aliases.DeleteLabelValues(id)
}

// register registers c on reg (nil: not at all), reusing an identical
// collector already registered; one it registered itself joins owned, for
// its component's Close to unregister.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, owned *registered) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(C); ok {
				return ex, nil
			}
		}
		return c, err
	}
	owned.mu.Lock()
	owned.reg = reg
	owned.cs = append(owned.cs, c)
	owned.mu.Unlock()
	return c, nil
}

// registered are the collectors a component registered itself (not those
// it reused from the registry), which its Close unregisters, so that none
// of its series outlives it and the component can be built again on the
// same registry.
type registered struct {
	mu  sync.Mutex
	reg prometheus.Registerer
	cs  []prometheus.Collector
}

// unregister unregisters the collectors registered; a second call does
// nothing.
func (r *registered) unregister() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cs {
		r.reg.Unregister(c)
	}
	r.cs = nil
}
