package gateway

import (
	"strings"

	"github.com/kvroute/kvroute/internal/usage"

	"github.com/kvroute/kvroute/internal/upstreamfail"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
)

// Result is the outcome of one proxied request, the result label of
// kvroute_gateway_requests_total.
type Result string

// The results a request can end with.
const (
	// ResultSuccess: the engine answered 2xx and the whole body reached the
	// client.
	ResultSuccess Result = "success"
	// ResultUpstreamStatus: the engine answered a non-2xx status, which was
	// passed through.
	ResultUpstreamStatus Result = "upstream_status"
	// ResultUpstreamUnreachable: the engine could not be connected to: it
	// refused the connection, its host was unreachable or its name did not
	// resolve (502).
	ResultUpstreamUnreachable Result = "upstream_unreachable"
	// ResultUpstreamTimeout: a deadline passed before the engine connected
	// or sent its response header (502).
	ResultUpstreamTimeout Result = "upstream_timeout"
	// ResultUpstreamClosed: the engine reset or closed the connection
	// before its response header (502).
	ResultUpstreamClosed Result = "upstream_closed"
	// ResultUpstreamError: the request to the engine failed before its
	// response header in another way, a malformed answer or an endpoint
	// address no request can be built for (502).
	ResultUpstreamError Result = "upstream_error"
	// ResultUpstreamBroken: the engine's response broke off mid-body
	// (kvroute_gateway_upstream_broken_total says how).
	ResultUpstreamBroken Result = "upstream_broken"
	// ResultClientAbort: the client went away before the response ended.
	ResultClientAbort Result = "client_abort"
	// ResultClientStalled: the client stopped reading the response for
	// Config.ResponseWriteTimeout; the response was cut.
	ResultClientStalled Result = "client_stalled"
	// ResultBodyTooLarge: the request body exceeded Config.MaxBodyBytes (413).
	ResultBodyTooLarge Result = "body_too_large"
	// ResultBodyBudget: the body (or its copy with a rewritten model) found
	// no room in Config.MaxBodyBytesInFlight (503 with Retry-After).
	ResultBodyBudget Result = "body_budget"
	// ResultBodyTimeout: the body did not arrive within
	// Config.BodyReadTimeout (408, connection closed).
	ResultBodyTimeout Result = "body_timeout"
	// ResultBadRequest: the body was unreadable or not a JSON object (400),
	// named a model no endpoint serves or the router does not index (404,
	// as vLLM answers a model it does not serve), or its X-Request-Id was
	// invalid (400) or already in flight (409); also a method other than
	// POST on an inference route (405), and a malformed admission or
	// session header (400).
	ResultBadRequest Result = "bad_request"
	// ResultNoEndpoint: no endpoint could be picked (503), including a
	// request whose admission queue deadline passed.
	ResultNoEndpoint Result = "no_endpoint"
	// ResultShed: the admission shed the request or its queue was full
	// (429 with Retry-After).
	ResultShed Result = "shed"
)

var results = []Result{ResultSuccess, ResultUpstreamStatus, ResultUpstreamUnreachable, ResultUpstreamTimeout,
	ResultUpstreamClosed, ResultUpstreamError, ResultUpstreamBroken,
	ResultClientAbort, ResultClientStalled, ResultBodyTooLarge, ResultBodyBudget, ResultBodyTimeout, ResultBadRequest, ResultNoEndpoint, ResultShed}

var apis = []render.API{render.APICompletions, render.APIChatCompletions, render.APIMessages, render.APIResponses, apiGenerate, apiCountTokens, apiModels, apiPreflight}

// apiMetrics are one API's label children, resolved once so that the request
// path does no label lookups.
type apiMetrics struct {
	results    map[Result]prometheus.Counter
	pick       prometheus.Observer
	firstChunk prometheus.Observer
}

type metrics struct {
	transferRemoved prometheus.Counter // client kv_transfer_params removed (Config.AllowClientKVTransferParams)
	sidecarRemoved  prometheus.Counter // requests whose client sidecar routing headers were removed (forward)
	byAPI           map[render.API]*apiMetrics
	usage           map[string]prometheus.Counter
	unrouted        prometheus.Counter                       // requests for a path the gateway serves nothing on
	notAllowed      map[string]prometheus.Counter            // 405s on methodPaths, by path
	broken          [len(upstreamResults)]prometheus.Counter // ResultUpstreamBroken requests by upstreamfail.Kind
	recordCut       prometheus.Counter                       // status-page records whose client texts were cut

	set        telemetry.Set          // of the collectors, for unregister
	collectors []prometheus.Collector // what newMetrics registered
}

// latencyBuckets span 1 ms to ~65 s.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)

// resultList names every Result, comma-separated, for the requests
// counter's help: written from results, it cannot leave one out.
func resultList() string {
	names := make([]string, len(results))
	for i, r := range results {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// newMetrics builds the gateway's metrics and registers them through set,
// all or none (no Registerer: none); bodyBytes reads the request body bytes
// in flight, resends the requests the gateway's own transport sent again.
func newMetrics(set telemetry.Set, bodyBytes, resends func() int64) (*metrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_gateway_requests_total",
		Help: "Inference requests handled by the gateway, with the token counts (api count_tokens) and model listings (api models) and CORS preflights (api preflight) it passes through, by API and result (" + resultList() + ").",
	}, []string{"api", "result"})
	pick := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kvroute_gateway_pick_duration_seconds",
		Help:    "Time the routing decision took (render call included; the body's upload before it not), by API.",
		Buckets: latencyBuckets,
	}, []string{"api"})
	first := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kvroute_gateway_first_chunk_seconds",
		Help:    "Time from receiving a request to the first response bytes from the engine (routing plus the engine's time to first token), by API.",
		Buckets: latencyBuckets,
	}, []string{"api"})
	usageVec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_gateway_usage_total",
		Help: "Successful responses read for the engine's cached prompt tokens (observeCachedTokens), by result: observed, no_usage, too_large, invalid, no_room (the body budget had no room for the buffer).",
	}, []string{"result"})
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kvroute_gateway_request_body_bytes_in_flight",
		Help: "Bytes of request body buffers held by requests in flight, with the response buffers read for their usage (observeCachedTokens), bounded by maxBodyBytesInFlight.",
	}, func() float64 { return float64(bodyBytes()) })
	unrouted := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_gateway_unrouted_requests_total",
		Help: "Requests for a path the gateway serves nothing on, answered 404 (one series: the path comes from the client).",
	})
	recordCut := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_gateway_status_truncated_total",
		Help: "Routed requests whose request ID or model name, as the client sent them, was cut to 256 bytes in the status page's latest requests.",
	})
	broken := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_gateway_upstream_broken_total",
		Help: "Requests counted as upstream_broken (the engine's response broke off mid-body), by kind: closed (the engine reset or closed the connection), timeout (a deadline passed while reading), other (a malformed body, such as bad chunked encoding), unreachable (not seen mid-body).",
	}, []string{"kind"})
	transferRemoved := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_gateway_client_transfer_params_removed_total",
		Help: "Requests whose body carried the client's own kv_transfer_params, removed before the engine saw them (allowClientKVTransferParams off).",
	})
	sidecarRemoved := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_gateway_client_sidecar_headers_removed_total",
		Help: "Requests whose header carried the client's own value of a header the decode pod's routing sidecar acts on (x-prefiller-host-port, x-llm-d-prefiller-host-port, the encoders', the KV source's, the data-parallel rank's), removed before the engine saw it: those are the router's to set.",
	})
	resent := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "kvroute_gateway_upstream_resends_total",
		Help: "Requests the gateway sent to an engine a second time, on a new connection, because the engine closed the reused keep-alive connection before any byte of answer (nothing had reached the client): an engine that had read the request may have run it twice. 0 with a transport of the embedder's own.",
	}, func() float64 { return float64(resends()) })
	notAllowed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_gateway_method_not_allowed_total",
		Help: "Requests for the model listing, /health, /ready, /metrics or the status page with a method the path does not serve, answered 405 with Allow, by path (the inference routes' 405s are bad_request in kvroute_gateway_requests_total).",
	}, []string{"path"})
	cs := []prometheus.Collector{requests, pick, first, usageVec, inFlight, unrouted, recordCut, broken, resent, transferRemoved, sidecarRemoved, notAllowed}
	if err := set.Register(cs...); err != nil {
		return nil, err
	}
	m := &metrics{byAPI: make(map[render.API]*apiMetrics, len(apis)), usage: map[string]prometheus.Counter{},
		unrouted: unrouted, recordCut: recordCut, transferRemoved: transferRemoved, sidecarRemoved: sidecarRemoved, set: set, collectors: cs,
		notAllowed: make(map[string]prometheus.Counter, len(methodPaths))}
	for _, p := range methodPaths {
		m.notAllowed[p] = notAllowed.WithLabelValues(p)
	}
	for k := range m.broken {
		m.broken[k] = broken.WithLabelValues(upstreamfail.Kind(k).String())
	}
	for _, r := range usage.Results {
		m.usage[r] = usageVec.WithLabelValues(r)
	}
	for _, api := range apis {
		am := &apiMetrics{
			results:    make(map[Result]prometheus.Counter, len(results)),
			pick:       pick.WithLabelValues(string(api)),
			firstChunk: first.WithLabelValues(string(api)),
		}
		for _, r := range results {
			am.results[r] = requests.WithLabelValues(string(api), string(r))
		}
		m.byAPI[api] = am
	}
	return m, nil
}

// methodPaths are the paths, besides the inference routes, that the
// gateway serves only to GET and HEAD, the path label's values of
// kvroute_gateway_method_not_allowed_total.
var methodPaths = []string{modelsPath, "/health", "/ready", "/metrics", StatusPath}

// unregister unregisters what newMetrics registered.
func (m *metrics) unregister() { m.set.Unregister(m.collectors...) }
