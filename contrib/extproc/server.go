package extproc

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/recent"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
)

// The protocol's default names, which Envoy's configuration must match.
const (
	// DefaultDestinationHeader carries the chosen "ip:port" to Envoy.
	DefaultDestinationHeader = "x-gateway-destination-endpoint"
	// DefaultMetadataNamespace is the dynamic-metadata namespace of the
	// chosen endpoint and of the served endpoint Envoy reports back.
	DefaultMetadataNamespace = "envoy.lb"
	// DefaultSubsetNamespace is the filter-metadata namespace of the subset
	// hint.
	DefaultSubsetNamespace = "envoy.lb.subset_hint"
	// DefaultSubsetKey names the list of candidate endpoints in the subset
	// hint.
	DefaultSubsetKey = "x-gateway-destination-endpoint-subset"
	// DefaultServedKey names the endpoint that served the request in the
	// response's metadata context.
	DefaultServedKey = "x-gateway-destination-endpoint-served"
	// DefaultMaxBodyBytes bounds a buffered request body: far above any text
	// prompt that fits a context window.
	DefaultMaxBodyBytes = 32 << 20
)

// Response headers the picker adds towards the client.
const (
	// EndpointHeader names the endpoint the picker chose.
	EndpointHeader = "x-kvroute-endpoint"
	// RenderFallbackHeader is "true" when the request could not be tokenized
	// and was routed by load alone.
	RenderFallbackHeader = "x-kvroute-render-fallback"
)

// The Inference Extension conformance suite's test hooks (Config.ConformanceTestHooks).
const (
	// ConformanceSelectionHeader is the request header whose comma-separated
	// "ip" or "ip:port" entries restrict a request's candidates, in that
	// order.
	ConformanceSelectionHeader = "test-epp-endpoint-selection"
	// ConformanceServedHeader is the response header the picker copies the
	// endpoint Envoy reports as having served the request into.
	ConformanceServedHeader = "x-conformance-test-served-endpoint"
)

// Health service names the picker reports, as the endpoint-picker protocol
// names them.
const (
	LivenessService  = "liveness"
	ReadinessService = "readiness"
	ExtProcService   = "envoy.service.ext_proc.v3.ExternalProcessor"
)

// PoolSyncedService is the health service name the Inference Extension's
// reference picker is probed by (its manifests point both the liveness and
// the readiness probe at it): not serving until the picker has been given
// its first endpoint set (discovery has synced), serving from then on until
// Shutdown. It does not follow the index's readiness, so that a liveness
// probe on it does not restart a picker whose KV-event streams are still
// catching up.
const PoolSyncedService = "inference-extension"

// Config configures a Server. The zero value uses the protocol's defaults.
type Config struct {
	// Model is the base model the engines serve. A request whose body names
	// another model is routed as a LoRA adapter of that name; empty means the
	// body's model is the base model.
	Model string `json:"model"`
	// MaxBodyBytes bounds the buffered request body; a larger one is
	// answered 413. 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// MaxBodyBytesInFlight bounds the bytes that the request bodies of all
	// streams hold together, as the kvroute gateway's key of that name does:
	// from a body's first chunk until Envoy has taken it back (the upstream
	// answered) or the stream ends. Bodies are buffered as their chunks
	// arrive, so a body that is sent slowly, or never finished, holds what
	// it has sent (at most twice that). A stream whose body finds no room is
	// answered 503 with Retry-After (an ImmediateResponse) and counted as
	// result "body_budget". 0 means DefaultMaxBodyBytesInFlight (or
	// MaxBodyBytes when that is larger); a value below MaxBodyBytes is an
	// error, since a body at the limit could never pass.
	MaxBodyBytesInFlight int64 `json:"maxBodyBytesInFlight"`
	// DestinationHeader, MetadataNamespace, SubsetNamespace, SubsetKey and
	// ServedKey override the protocol's names; empty means the defaults.
	DestinationHeader string `json:"destinationHeader"`
	MetadataNamespace string `json:"metadataNamespace"`
	SubsetNamespace   string `json:"subsetNamespace"`
	SubsetKey         string `json:"subsetKey"`
	ServedKey         string `json:"servedKey"`
	// Fallbacks is how many fallback endpoints the picker names after its
	// pick (protocol v0.4.0: "ip:port,ip:port,..." in the destination header
	// and metadata), the next best by kvroute's score, so that Envoy, with a
	// retry policy, tries them in order when the pick fails. 0, the default,
	// names the pick alone. At most MaxFallbacks. A router with package
	// disagg's P/D profile names the pick alone whatever this says (see
	// that package's documentation).
	Fallbacks int `json:"fallbacks"`
	// ConformanceTestHooks turns on the hooks the Inference Extension's
	// conformance suite steers a picker with, as its reference picker does:
	// ConformanceSelectionHeader restricts a request's candidates, and
	// ConformanceServedHeader reports the endpoint that served it. Off by
	// default: with it on, any client chooses its own endpoint.
	ConformanceTestHooks bool `json:"conformanceTestHooks"`
	// ObserveCachedTokens reads the cached prompt tokens the engine reports
	// in each successful response's usage (vLLM started with
	// --enable-prompt-tokens-details) from the response body chunks Envoy
	// sends the picker, and ends the request with them
	// (kvroute.Decision.Done with DoneInfo.CachedTokens), closing the
	// router's loop on the index's accuracy as the kvroute gateway's key of
	// that name does. The buffer that reads a usage (a JSON body, or one
	// line of a stream, at most 1 MiB) is charged to MaxBodyBytesInFlight; a
	// response whose buffer finds no room is passed through unread (usage
	// result "no_room"). A split (P/D) request is not read: its decoder
	// reports the transferred prompt as cached. Leave it off for engines
	// that do not report the details (a usage without them reads as 0
	// cached tokens). The picker reads the response body chunks Envoy sends
	// it, so the ext_proc filter's response body mode must send them:
	// FULL_DUPLEX_STREAMED, or STREAMED, BUFFERED or BUFFERED_PARTIAL from
	// an Envoy that names its body modes in the stream's first message
	// (protocol_config; without it the picker answers each chunk as
	// FULL_DUPLEX_STREAMED wants, which Envoy refuses in the other modes);
	// streams carry usage only when the client asked for
	// stream_options.include_usage.
	ObserveCachedTokens bool `json:"observeCachedTokens"`
	// AllowClientKVTransferParams passes on the kv_transfer_params member
	// of a client's body, as the kvroute gateway's key of that name does.
	// By default the picker removes it from every inference body it sends
	// back to Envoy (counted in
	// kvroute_extproc_client_transfer_params_removed_total): vLLM's KV
	// connectors act on it, and a client's do_remote_prefill with its own
	// remote_host would make the engine pull KV blocks from whatever
	// address the client names. Set it only behind a trusted component
	// that disaggregates itself and sets transfer parameters.
	AllowClientKVTransferParams bool `json:"allowClientKVTransferParams"`
}

// MaxFallbacks bounds Config.Fallbacks: Envoy tries the list one endpoint
// per retry, and a longer list only lengthens every response header.
const MaxFallbacks = 16

func (c *Config) setDefaults() error {
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("extproc: maxBodyBytes %d is negative", c.MaxBodyBytes)
	}
	if c.Fallbacks < 0 || c.Fallbacks > MaxFallbacks {
		return fmt.Errorf("extproc: fallbacks %d is not in [0, %d]", c.Fallbacks, MaxFallbacks)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	switch {
	case c.MaxBodyBytesInFlight < 0:
		return fmt.Errorf("extproc: maxBodyBytesInFlight %d is negative", c.MaxBodyBytesInFlight)
	case c.MaxBodyBytesInFlight == 0:
		c.MaxBodyBytesInFlight = max(DefaultMaxBodyBytesInFlight, c.MaxBodyBytes)
	case c.MaxBodyBytesInFlight < c.MaxBodyBytes:
		return fmt.Errorf("extproc: maxBodyBytesInFlight %d is below maxBodyBytes %d: a body at the limit could never be buffered",
			c.MaxBodyBytesInFlight, c.MaxBodyBytes)
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.DestinationHeader, DefaultDestinationHeader)
	def(&c.MetadataNamespace, DefaultMetadataNamespace)
	def(&c.SubsetNamespace, DefaultSubsetNamespace)
	def(&c.SubsetKey, DefaultSubsetKey)
	def(&c.ServedKey, DefaultServedKey)
	return nil
}

// Options are a Server's optional dependencies; the zero value is valid.
type Options struct {
	// Set is the observability bundle (registerer, logger, tracer
	// provider, clock; see package telemetry):
	//   Registerer receives the picker's metrics; nil registers nothing.
	//   Logger receives the picker's logs; nil discards them.
	//   TracerProvider traces each routed stream as a SpanRoute span,
	//   joined to Envoy's trace (the stream's traceparent metadata) or the
	//   request's traceparent header; give the Router the same provider so
	//   that its pick span is a child. Nil traces nothing and costs nothing.
	telemetry.Set
	// Admission is the admission stage the Picker's Router was built with
	// (kvroute.Options.Admission), or nil. With it the picker reads the
	// admission's request headers (HeaderObjective, HeaderFairnessID,
	// HeaderQueueTimeout) into the pick's context, tells it of every pick,
	// first chunk and end (Notify), and answers its refusals: 429 with
	// Retry-After when shed or the queue is full, 503 when the queue
	// deadline passed or it closed, both naming the reason in
	// HeaderAdmission. Nil reads no admission header.
	Admission *admission.Controller
	// Approximate is the approximate index the Picker's Router was built
	// with (kvroute.Options.Approximate), or nil. With it the status page
	// and ReadyPath show each endpoint's cache mode (precise, approximate
	// or blind); each request's mode is shown either way.
	Approximate *approx.Index
	// Session is the session affinity the Picker's Router was built with
	// (its Scorer in kvroute.Options.Scorers, its Profile as
	// kvroute.Options.Profile), or nil. The Router's profile reads each
	// request's session key from its headers (or llm-d's cookie) and
	// records the pick; with it the picker also records the endpoint that
	// served when Envoy fell back to another (Served), sets llm-d's session
	// cookie on the response of a request without a key (ResponseCookie),
	// and answers a malformed key under Strict with 400.
	Session *session.Affinity
}

// Server is the ext_proc endpoint picker. It is safe for concurrent use:
// Envoy opens one stream per HTTP request, each served on its own goroutine.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	cfg       Config
	picker    kvroute.Picker
	log       *slog.Logger
	met       *metrics
	health    *health.Server
	endpoints atomic.Pointer[[]kvroute.Endpoint]
	synced    sync.Once // PoolSyncedService turned serving by the first SetEndpoints
	ready     atomic.Bool
	down      atomic.Bool            // set by Shutdown under readyMu: ready stays false from then on
	readyMu   sync.Mutex             // orders SetReady against Shutdown
	reason    atomic.Pointer[string] // why FollowReadiness's source last said not ready ("" when ready); nil before it asked
	clock     telemetry.Clock
	recent    recent.Ring[streamRecord] // the status page's latest streams
	approx    *approx.Index             // Options.Approximate; nil: no per-endpoint modes
	admission *admission.Controller     // nil without Options.Admission (admission.go)
	session   *session.Affinity         // nil without Options.Session
	tracer    trace.Tracer              // nil without Options.TracerProvider: no spans (tracing.go)
	bodies    bytebudget.Budget         // the request bodies' bytes, bounded by Config.MaxBodyBytesInFlight

	bodyModeLogged atomic.Bool // a request body mode other than FULL_DUPLEX_STREAMED was logged (requestbody.go)
}

// New builds a Server that chooses with picker (a *kvroute.Router in
// production). Give it endpoints with SetEndpoints and register it on a
// grpc.Server with Register.
func New(cfg Config, picker kvroute.Picker, opts Options) (*Server, error) {
	if picker == nil {
		return nil, errors.New("extproc: a Picker is required")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, picker: picker, log: opts.Logger, health: health.NewServer(), clock: opts.Clk(),
		admission: opts.Admission, approx: opts.Approximate, session: opts.Session}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if opts.TracerProvider != nil {
		s.tracer = opts.TracerProvider.Tracer(TracerName)
	}
	s.bodies.Limit = cfg.MaxBodyBytesInFlight
	var err error
	if s.met, err = newMetrics(opts.Set, s.bodies.InUse); err != nil {
		return nil, err
	}
	empty := []kvroute.Endpoint{}
	s.endpoints.Store(&empty)
	s.health.SetServingStatus(LivenessService, healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(PoolSyncedService, healthpb.HealthCheckResponse_NOT_SERVING)
	s.SetReady(false)
	return s, nil
}

// Register registers the ext_proc service and the gRPC health service on g.
func (s *Server) Register(g *grpc.Server) {
	extprocv3.RegisterExternalProcessorServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
}

// Health returns the health service, for serving it on a port of its own.
func (s *Server) Health() healthpb.HealthServer { return s.health }

// SetReady sets the readiness the health service reports (readiness and the
// ext_proc service name). A Server is not ready until told: the host knows
// when its endpoint discovery has synced; FollowReadiness then keeps it in
// step with the router's index (and calls SetReady itself). After
// Shutdown it has no effect.
func (s *Server) SetReady(ready bool) {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	if s.down.Load() {
		return // after Shutdown the picker stays not ready, whoever asks
	}
	s.ready.Store(ready)
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ready {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus(ReadinessService, st)
	s.health.SetServingStatus(ExtProcService, st)
	s.health.SetServingStatus("", st)
}

// Shutdown marks every service not serving, so that health checks (and
// ReadyPath, with the reason "shutting down") fail while the gRPC server
// drains. It is final: a later SetReady, FollowReadiness's included, does
// not make the picker ready again.
func (s *Server) Shutdown() {
	s.readyMu.Lock()
	s.down.Store(true)
	s.ready.Store(false)
	s.readyMu.Unlock()
	s.health.Shutdown()
}

// Close shuts the health service down (as Shutdown does) and unregisters
// the metrics New registered, so that another Server can be built on the
// same registry; streams still open keep counting in the unregistered
// metrics. Call it once the gRPC server has stopped. It is idempotent.
func (s *Server) Close() {
	s.Shutdown()
	s.met.unregister()
}

// SetEndpoints replaces the candidate endpoints of every later request. It
// does not touch the Picker: a kvroute.Router is told separately (its own
// SetEndpoints subscribes to the endpoints' KV events). The first call, the
// discovery's first set even when empty, turns PoolSyncedService serving.
func (s *Server) SetEndpoints(eps []kvroute.Endpoint) {
	c := slices.Clone(eps)
	if c == nil {
		c = []kvroute.Endpoint{}
	}
	s.endpoints.Store(&c)
	s.synced.Do(func() { s.health.SetServingStatus(PoolSyncedService, healthpb.HealthCheckResponse_SERVING) })
}

// Endpoints returns the current candidate endpoints (a copy).
func (s *Server) Endpoints() []kvroute.Endpoint { return slices.Clone(*s.endpoints.Load()) }

// Process serves one ext_proc stream: one HTTP request and its response.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	st := &streamState{srv: s, stream: stream}
	var err error
	defer func() {
		attrs := st.spanAttributes() // before finish releases the decision
		st.finish()
		st.endSpan(attrs, err) // after the Router's pick span, which ends at the release
	}()
	err = st.run()
	return err
}
