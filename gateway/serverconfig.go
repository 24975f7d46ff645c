package gateway

import (
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/session"
)

// Policy selects how a Server picks endpoints.
type Policy string

// The routing policies.
const (
	// PolicyPrecise routes with a kvroute.Router: precise prefix-cache
	// routing fed by the engines' KV events and render endpoints.
	PolicyPrecise Policy = "precise"
	// PolicyRoundRobin routes cache-blind, in turn (for comparisons).
	PolicyRoundRobin Policy = "round-robin"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Listen is the TCP address to serve on, e.g. ":8080" or "127.0.0.1:0"
	// (a free port; Server.Addr tells which).
	Listen string
	// Policy is the routing policy; empty means PolicyPrecise.
	Policy Policy
	// Router configures the kvroute.Router of PolicyPrecise.
	Router kvroute.Config
	// Proxy configures the Handler. An empty Proxy.Model takes Router.Model.
	Proxy Config
	// Endpoints are the initial endpoints; SetEndpoints replaces them.
	Endpoints []kvroute.Endpoint
	// ReadHeaderTimeout is the time a client has to send a request's
	// header: from the connection's start for its first request, from the
	// first byte of each later one on a keep-alive connection. A connection
	// whose header is late is closed and counted in
	// kvroute_gateway_header_timeouts_total. The body has
	// Proxy.BodyReadTimeout after it on every path: a request answered
	// without reading its body (a 404, a 405, /health) still has that time
	// to send it, as net/http reads an unread body (up to 256 KiB) before
	// the answer, and a body late then has its connection closed after the
	// answer. 0 means DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request before it is closed. 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Admission, when set, puts an admission stage (package admission) in
	// front of the Router's picks: requests carry their objective, fairness
	// ID and queue timeout in the headers HeaderObjective (or
	// HeaderObjectiveLLMD), HeaderFairnessID and HeaderQueueTimeout; shed
	// requests are answered 429 with Retry-After, those that found no free
	// endpoint in time 503, both naming the reason in HeaderAdmission. Nil
	// admits every request at once. PolicyPrecise only.
	Admission *admission.Config
	// AdmissionDetectors are the engines' saturation signals the admission
	// consults besides kvroute's own accounting (see admission.Detector).
	AdmissionDetectors []admission.Detector
	// EngineMetrics, when set with Admission, scrapes every endpoint's
	// Prometheus metrics (package enginemetrics) and adds the engines'
	// waiting queues and KV-cache usage to the admission's saturation
	// signals; an endpoint whose scrape is stale is judged by kvroute's own
	// accounting.
	EngineMetrics *enginemetrics.Config
	// Disagg, when set, makes the Router's profile step package disagg's
	// prefill/decode Profile: each request goes to a decode endpoint
	// (Endpoint.Role decode, both or none) and, when the decider splits
	// it, names its prefill endpoint in the x-prefiller-host-port header
	// for the decode pod's routing sidecar. Nil picks in one role among
	// every endpoint. PolicyPrecise only.
	Disagg *disagg.Config
	// DisaggHost is how the gateway carries out Disagg's split decisions:
	// in header mode (the default) it names the prefill endpoint in
	// x-prefiller-host-port for the decode pod's sidecar; in exchange mode
	// it runs the two-step exchange itself (sidecar.Exchange, whose
	// kvroute_sidecar_* metrics it then serves). Set only with Disagg.
	DisaggHost DisaggHostConfig
	// LoRA, when set, adds the LoRA adapter-affinity scorer (package lora)
	// to the Router's scorers: a request whose model names an adapter goes
	// preferably to an engine running it, as the engines' own
	// vllm:lora_requests_info says. It reads the engine-metrics scraper,
	// built with EngineMetrics (or its defaults when EngineMetrics is nil,
	// in which case the scraper feeds only this scorer). An endpoint whose
	// metrics cannot be scraped is scored neutral and counted in
	// kvroute_lora_candidates_total{state="unknown"}; the request is still
	// routed by load. PolicyPrecise only.
	LoRA *lora.Config
	// Session, when set, turns session affinity on (package session): a
	// request's session key (headers x-session-id, x-dynamo-session-id,
	// x-smg-routing-key, the llm-d-session cookie, or derived from the
	// body when configured) makes the Router prefer the endpoint that
	// served the session's last turn, weighed against its load; with
	// Router.Cluster the sessions are shared with the other replicas. A
	// response to a request without a key sets llm-d's session cookie
	// (llm-d-session=<base64 of the endpoint's ID>; Path=/; HttpOnly;
	// SameSite=Lax) unless Session.SetCookie is false, so a client that
	// keeps cookies sticks. A malformed key is skipped and counted, or
	// answered 400 with Session.Strict. PolicyPrecise only.
	Session *session.Config
	// Models, when set, serves several models behind one Router (package
	// models): each endpoint's served models come from Models.Served, its
	// Models.Label, the engines' /v1/models (Models.Poll) or its own
	// Endpoint.Models; a request is routed only among the endpoints
	// serving its model (after Models.Rewrites), a model none serves is
	// answered 404, and GET /v1/models lists the served models with the
	// cards the engines' /v1/models gave them (vLLM's ModelCard: root,
	// parent, max_model_len). A model an engine's /v1/models lists with a
	// parent (a LoRA adapter of that base model), or Models.Adapters names
	// the base of, is routed as a LoRA request (kvroute.Request.LoRA), for
	// the LoRA scorer. Nil: one model, Router.Model. PolicyPrecise only.
	Models *models.Config
	// Approximate configures the approximate prefix index of the endpoints
	// whose KV-event stream is not live (package approx; approx.Config.Enabled
	// turns it on). Nil is approx.Config{}: none kept, such endpoints are
	// routed blind. When enabled (and its capacityFrom is not "config"),
	// each endpoint's index is sized to its engine's own capacity, read
	// from vLLM's vllm:cache_config_info by the engine-metrics scraper
	// (built with EngineMetrics' settings, or, when nothing else reads it,
	// every CapacityScrapeInterval); an engine whose metrics cannot be
	// read gets the configured capacity, counted in
	// kvroute_approx_capacity_fallbacks_total and shown on the status page. Either way the status page, /ready and
	// kvroute_router_decision_mode_total show each endpoint's and each
	// decision's mode. PolicyPrecise only.
	Approximate *approx.Config
	// PeerLoadFromMetrics gives the Router an estimate of the load the
	// other gateway replicas (and any client that reaches the engines
	// directly) carry on each endpoint: every scrape interval, each
	// engine's scraped waiting and running requests less the ones this
	// gateway has open there (enginemetrics.PeerLoads, into the Router's
	// tokenload.Tracker as its peers' share). For active-active replicas
	// that share no state: each otherwise sees only its own requests, and
	// a request sends no KV event before its prefill starts. The scraper is
	// built with EngineMetrics' settings (or its defaults). It cannot be
	// combined with Router.Cluster, which shares the peers' load itself.
	// PolicyPrecise only.
	PeerLoadFromMetrics bool
}
