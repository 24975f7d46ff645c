package extproc

import (
	"fmt"
	"sync/atomic"

	"github.com/kvroute/kvroute/internal/usage"

	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
)

// Results of one ext_proc stream, the values of the result label of
// kvroute_extproc_requests_total.
const (
	resultRouted       = "routed"
	resultPassthrough  = "passthrough"
	resultNoEndpoint   = "no_endpoint"
	resultBodyTooLarge = "body_too_large"
	resultBadRequest   = "bad_request"
	resultClientAbort  = "client_abort"
	resultShed         = "shed"
	resultBodyBudget   = "body_budget"
	resultBodyMode     = "body_mode"
)

var results = []string{resultRouted, resultPassthrough, resultNoEndpoint, resultBodyTooLarge, resultBadRequest, resultClientAbort, resultShed, resultBodyBudget, resultBodyMode}

// Request-phase messages that break the stream's order, the values of the
// message label of kvroute_extproc_protocol_errors_total: the request
// headers a second time, a request body after the request's end of stream,
// request trailers after the request's end of stream had come with them; or
// a request body or trailers before the request headers.
const (
	protoRequestHeaders  = "request_headers"
	protoRequestBody     = "request_body"
	protoRequestTrailers = "request_trailers"
)

var protocolErrorKinds = []string{protoRequestHeaders, protoRequestBody, protoRequestTrailers}

type metrics struct {
	requests        map[string]prometheus.Counter
	protocolErrors  map[string]prometheus.Counter
	pick            prometheus.Histogram
	renderFallbacks prometheus.Counter
	servedMismatch  prometheus.Counter
	servedFallback  prometheus.Counter
	aborted         prometheus.Counter
	invalidHints    prometheus.Counter            // subset hints with a value that is not a string
	invalidServed   prometheus.Counter            // served-endpoint reports that are not a string
	recordCut       prometheus.Counter            // status-page records whose texts were cut
	usage           map[string]prometheus.Counter // by usage result (Config.ObserveCachedTokens)
	transferRemoved prometheus.Counter            // client kv_transfer_params removed (Config.AllowClientKVTransferParams)
	passthroughSeq  atomic.Uint64

	set        telemetry.Set          // of the collectors, for unregister
	collectors []prometheus.Collector // what newMetrics registered
}

// newMetrics builds the picker's metrics and registers them through set,
// all or none (no Registerer: none). bodyBytes reports the request body
// bytes the streams hold.
func newMetrics(set telemetry.Set, bodyBytes func() int64) (*metrics, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_extproc_requests_total",
		Help: "ext_proc streams by result: routed (chosen by kvroute), passthrough (no prompt: round robin), no_endpoint (503, admission expired or closed included), body_too_large (413), bad_request (400, a malformed admission header included), client_abort (the stream ended before the pick, while queued included), shed (429 from the admission: shed or queue full), body_budget (503: the body found no room in maxBodyBytesInFlight), body_mode (500: a request with a body that Envoy does not send FULL_DUPLEX_STREAMED, as its protocol_config said).",
	}, []string{"result"})
	protoVec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_extproc_protocol_errors_total",
		Help: "ext_proc streams ended with gRPC status InvalidArgument because a request-phase message came after the request's end of stream (or the request headers came twice, or a body or trailers came before them), by that message: request_headers, request_body, request_trailers.",
	}, []string{"message"})
	m := &metrics{
		requests:       map[string]prometheus.Counter{},
		protocolErrors: map[string]prometheus.Counter{},
		pick: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kvroute_extproc_pick_duration_seconds",
			Help:    "Time the picker spent choosing an endpoint for a complete request body, render and the admission queue's wait included.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}),
		renderFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_extproc_render_fallbacks_total",
			Help: "Requests routed by load alone because their render failed (the client sees x-kvroute-render-fallback: true).",
		}),
		servedMismatch: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_extproc_served_mismatch_total",
			Help: "Responses Envoy reports as served by another endpoint than the one picked (a retry down the list).",
		}),
		servedFallback: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_extproc_served_fallback_total",
			Help: "Responses Envoy reports as served by one of the fallbacks the picker named after its pick; the request's load moved there.",
		}),
		aborted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_extproc_aborted_total",
			Help: "Routed requests whose stream ended before their response did (client disconnect, reset); their load was released at the stream's end.",
		}),
		invalidHints: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_extproc_invalid_subset_hints_total",
			Help: "Requests whose subset hint held a value that is not a string (a list item, or the hint itself when it is no list): the value named no endpoint, and a 503 for want of one says the hint was malformed.",
		}),
		invalidServed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_extproc_invalid_served_endpoints_total",
			Help: "Responses whose served-endpoint metadata from Envoy was not a string: it named no endpoint, so the request's load stayed with the pick.",
		}),
		recordCut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_extproc_status_truncated_total",
			Help: "Streams whose request ID, path, model name or served endpoint, as the client or Envoy sent them, was cut to 256 bytes in the status page's latest streams.",
		}),
	}
	m.transferRemoved = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_extproc_client_transfer_params_removed_total",
		Help: "Requests whose body carried the client's own kv_transfer_params, removed before Envoy forwarded it (allowClientKVTransferParams off).",
	})
	usageVec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_extproc_usage_total",
		Help: "Successful responses read for the engine's cached prompt tokens (observeCachedTokens), by result: observed, no_usage, too_large, invalid, no_room (maxBodyBytesInFlight had no room for the buffer).",
	}, []string{"result"})
	m.usage = map[string]prometheus.Counter{}
	for _, r := range usage.Results {
		m.usage[r] = usageVec.WithLabelValues(r)
	}
	bodies := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kvroute_extproc_request_body_bytes_in_flight",
		Help: "Bytes of request body buffers held by ext_proc streams, with the response buffers read for their usage (observeCachedTokens), bounded by maxBodyBytesInFlight.",
	}, func() float64 { return float64(bodyBytes()) })
	for _, r := range results {
		m.requests[r] = vec.WithLabelValues(r)
	}
	for _, k := range protocolErrorKinds {
		m.protocolErrors[k] = protoVec.WithLabelValues(k)
	}
	cs := []prometheus.Collector{vec, protoVec, m.pick, m.renderFallbacks, m.servedMismatch, m.servedFallback, m.aborted, m.invalidHints, m.invalidServed, m.recordCut, usageVec, m.transferRemoved, bodies}
	if err := set.Register(cs...); err != nil {
		return nil, fmt.Errorf("extproc: metrics: %w", err)
	}
	m.set, m.collectors = set, cs
	return m, nil
}

// unregister unregisters what newMetrics registered.
func (m *metrics) unregister() { m.set.Unregister(m.collectors...) }

func (m *metrics) result(r string) { m.requests[r].Inc() }
