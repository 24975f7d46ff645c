package kvroute

import (
	"crypto/sha256"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// maxTopicModelBytes bounds the topic model kept per endpoint (it comes from
// the wire).
const maxTopicModelBytes = 256

// modelMismatch is an endpoint whose KV events name a model it does not
// serve: not the router's Config.Model, nor one of its Endpoint.Models.
type modelMismatch struct {
	Endpoint   string // the endpoint's ID
	TopicModel string // the model its event topic names (kv@<ip:port>@<model>), at most 256 bytes
}

// modelCheck compares the model of each endpoint's KV-event topic with the
// router's model. The router indexes every event under its own model, so the
// events themselves still match requests without a model; but a mismatch
// means the engine serves (or calls) its model by another name, and clients
// that send that name are routed as a LoRA adapter that no engine reports —
// cache-blind. Each endpoint's state is exported as
// kvroute_router_endpoint_model_mismatch{endpoint} (1 or 0, only for
// endpoints given to SetEndpoints, so no label comes from the wire), and the
// switch to a mismatch is logged as a warning, once per change.
type modelCheck struct {
	model string
	log   *slog.Logger
	gauge *prometheus.GaugeVec

	mu     sync.Mutex
	known  map[string]Endpoint
	seen   map[string]seenTopic // known endpoint → its topic's model, as last observed
	topics map[string]string    // endpoint → its topic's model, when it differs
}

func newModelCheck(model string, reg prometheus.Registerer, log *slog.Logger) (*modelCheck, error) {
	m := &modelCheck{model: model, log: log, known: map[string]Endpoint{}, seen: map[string]seenTopic{}, topics: map[string]string{},
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kvroute_router_endpoint_model_mismatch",
			Help: "1 when the endpoint's KV-event topic names another model than the router's configured model (a served-model alias or the wrong model), 0 when it names the same one.",
		}, []string{"endpoint"})}
	if reg != nil {
		if err := reg.Register(m.gauge); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe is the event pool's kvevents.TopicObserver.
func (m *modelCheck) observe(endpoint, topicModel string) {
	if topicModel == "" {
		return // vLLM's default empty topic names no model: nothing to compare
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ep, ok := m.known[endpoint]
	if !ok {
		return // bind mode: a topic naming an endpoint the router was not given
	}
	seen := seenTopic{model: topicModel}
	if len(topicModel) > maxTopicModelBytes {
		seen = seenTopic{model: strings.Clone(topicModel[:maxTopicModelBytes]), long: true, digest: sha256.Sum256([]byte(topicModel))}
	}
	m.seen[endpoint] = seen
	m.checkLocked(endpoint, seen.model, ep.serves(topicModel, m.model))
}

// seenTopic is the model an endpoint's topic named, kept within
// maxTopicModelBytes: a longer name is kept cut, with the digest of the
// whole, so that setKnown compares the whole name with the endpoint's
// models, not its cut, which names none of them.
type seenTopic struct {
	model  string // cut to maxTopicModelBytes
	long   bool   // the name was longer than maxTopicModelBytes
	digest [sha256.Size]byte
}

// is reports whether name is the model the topic named.
func (s seenTopic) is(name string) bool {
	if !s.long {
		return name == s.model
	}
	return len(name) > maxTopicModelBytes && name[:maxTopicModelBytes] == s.model && sha256.Sum256([]byte(name)) == s.digest
}

// servedBy is Endpoint.serves for the model the topic named.
func (s seenTopic) servedBy(ep Endpoint, base string) bool {
	if !s.long {
		return ep.serves(s.model, base)
	}
	if len(ep.Models) == 0 {
		return s.is(base)
	}
	return slices.ContainsFunc(ep.Models, s.is)
}

// checkLocked sets endpoint's state for its topic's model: the gauge, the
// mismatch, and a warning when it begins or names another model.
func (m *modelCheck) checkLocked(endpoint, topicModel string, served bool) {
	if served {
		delete(m.topics, endpoint)
		m.gauge.WithLabelValues(endpoint).Set(0)
		return
	}
	if old, ok := m.topics[endpoint]; ok && old == topicModel {
		return
	}
	m.topics[endpoint] = topicModel
	m.gauge.WithLabelValues(endpoint).Set(1)
	m.log.Warn("kvroute: an endpoint's KV events name another model than the router's; requests naming the events' model would never match (configure the router's model as the engines' base model and map aliases in the gateway)",
		"endpoint", endpoint, "topicModel", topicModel, "routerModel", m.model)
}

// setKnown replaces the endpoints whose topics are checked, and checks the
// topic last observed of each that stays against its models now: an
// endpoint whose Models came to list its topic's model (or stopped
// listing it) changes state at once, not at its engine's next topic,
// which an idle engine may not send for long. A topic model longer than
// maxTopicModelBytes is compared whole (seenTopic).
func (m *modelCheck) setKnown(eps map[string]Endpoint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.known = eps
	for id, seen := range m.seen {
		if ep, ok := eps[id]; ok {
			m.checkLocked(id, seen.model, seen.servedBy(ep, m.model))
		}
	}
}

// remove forgets an endpoint that left the pool and its series.
func (m *modelCheck) remove(id string) {
	m.mu.Lock()
	delete(m.seen, id)
	delete(m.topics, id)
	m.gauge.DeleteLabelValues(id)
	m.mu.Unlock()
}

// mismatches returns the endpoints whose KV-event topic currently names
// another model than the router's, sorted by endpoint ID; empty when every
// topic agrees or names no model.
func (m *modelCheck) mismatches() []modelMismatch {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]modelMismatch, 0, len(m.topics))
	for ep, model := range m.topics {
		out = append(out, modelMismatch{Endpoint: ep, TopicModel: model})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Endpoint < out[j].Endpoint })
	return out
}
