package k8s

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// Problems a Ready pod's labels or annotations can have that discovery
// works around (the reason label of kvroute_k8s_discovery_pod_problems).
const (
	problemPortAnnotation   = iota // an events or replay port annotation that is not a port: the router's configured port applies
	problemRole                    // a role label value that is no role: the pod serves both roles
	problemModelsAnnotation        // a models annotation with names left out (invalid, repeated, or beyond the bound)
	problemPodIP                   // a status.podIP that is no IP address: the pod is left out, its endpoint IDs would be
	problemActivePorts             // an active-ports annotation with entries that are no target port (they are left out), or with none at all (the pod is)
	problemDuplicateAddress        // an endpoint ID (IP:port) a pod created earlier already has (hostNetwork pods on one node): the pod is left out
	numProblems
)

var problemReasons = [numProblems]string{"bad_port_annotation", "unknown_role", "bad_models_annotation", "bad_pod_ip", "bad_active_ports", "duplicate_address"}

// podProblems records which problems one pod has (each counted once per
// pod, however many of its annotations have it).
type podProblems [numProblems]bool

// metrics are a Discovery's metrics. recompute, which runs on one
// goroutine at a time (see Discovery), is their only writer.
type metrics struct {
	endpoints    prometheus.Gauge              // kvroute_k8s_discovery_endpoints
	leftOut      prometheus.Gauge              // kvroute_k8s_discovery_endpoints_left_out
	podsLeftOut  prometheus.Gauge              // kvroute_k8s_discovery_pods_left_out
	poolUnusable prometheus.Gauge              // kvroute_k8s_discovery_pool_unusable
	problems     [numProblems]prometheus.Gauge // kvroute_k8s_discovery_pod_problems{reason}
	sinkErrors   prometheus.Counter            // kvroute_k8s_discovery_sink_errors_total
	set          telemetry.Set                 // of the collectors, for Close
	collectors   []prometheus.Collector
}

// newMetrics builds the metrics and registers them through set, all or
// none (no Registerer: none). Two Discoveries on one registry need
// different constant labels (telemetry.Set.With).
func newMetrics(set telemetry.Set) (*metrics, error) {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m := &metrics{
		endpoints:    gauge("kvroute_k8s_discovery_endpoints", "Endpoints in the set discovery last computed."),
		leftOut:      gauge("kvroute_k8s_discovery_endpoints_left_out", "Endpoints of Ready pods left out of the set because it is over maxEndpoints (the endpoints of the pods left out whole)."),
		podsLeftOut:  gauge("kvroute_k8s_discovery_pods_left_out", "Ready pods left out of the set, whole, because their endpoints would put it over maxEndpoints."),
		poolUnusable: gauge("kvroute_k8s_discovery_pool_unusable", "1 while the followed InferencePool is unusable (missing or being deleted; its CRD not installed; an empty selector or one with an invalid label name or value; no target port, or one listed twice) and the set is empty."),
		sinkErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_k8s_discovery_sink_errors_total",
			Help: "Endpoint sets the sink (the router) returned an error for; discovery sends the set again at the next change, changed or not.",
		}),
	}
	problems := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvroute_k8s_discovery_pod_problems",
		Help: "Ready pods of the set whose labels or annotations discovery works around, by reason: bad_port_annotation (the configured port applies), unknown_role (serves both roles), bad_models_annotation (names left out), bad_pod_ip (status.podIP is no IP address: the pod is left out), bad_active_ports (active-ports annotation entries that are no target port are left out, or an annotation that lists no port leaves the pod out), duplicate_address (an endpoint ID, IP:port, that a pod created earlier already has, as two hostNetwork pods on one node serving one port would: the pod is left out as not ready).",
	}, []string{"reason"})
	for i, r := range problemReasons {
		m.problems[i] = problems.WithLabelValues(r)
	}
	cs := []prometheus.Collector{m.endpoints, m.leftOut, m.podsLeftOut, m.poolUnusable, problems, m.sinkErrors}
	if err := set.Register(cs...); err != nil {
		return nil, err
	}
	m.set, m.collectors = set, cs
	return m, nil
}

// unregister unregisters what newMetrics registered.
func (m *metrics) unregister() { m.set.Unregister(m.collectors...) }
