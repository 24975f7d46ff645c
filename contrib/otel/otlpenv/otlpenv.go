package otlpenv

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTLP transport protocols the exporters speak, as
// OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// DefaultProtocol is the protocol when the environment names none: the
// OpenTelemetry specification's default.
const DefaultProtocol = ProtocolHTTPProtobuf

// DefaultServiceName is the service.name of Config's zero value.
const DefaultServiceName = "kvroute"

// Config configures NewTracerProvider beyond what the environment says.
type Config struct {
	// ServiceName is the resource's service.name unless OTEL_SERVICE_NAME
	// or OTEL_RESOURCE_ATTRIBUTES sets one (default DefaultServiceName).
	ServiceName string `json:"serviceName"`
	// Protocol is the OTLP protocol when neither OTEL_EXPORTER_OTLP_PROTOCOL
	// nor its _TRACES_ form names one: ProtocolGRPC or ProtocolHTTPProtobuf
	// (default DefaultProtocol, the specification's). kvroute-epp sets
	// ProtocolGRPC, the protocol llm-d's router picker always exports over,
	// so that an endpoint its chart names (a collector's gRPC port 4317) is
	// spoken to as it expects.
	Protocol string `json:"protocol"`
	// SampleRatio, when OTEL_TRACES_SAMPLER is not set, samples that ratio
	// of new traces (parent-based: a request whose caller sampled it is
	// sampled too); 0 keeps the SDK's own default, every trace. kvroute-epp
	// sets 0.1, llm-d's router picker's default.
	SampleRatio float64 `json:"sampleRatio"`
}

// Options are NewTracerProvider's injected dependencies; the zero value is
// valid.
type Options struct {
	// Getenv reads the variables this package interprets (the switch and
	// the protocol); nil is os.Getenv. The exporters and the SDK read their
	// own variables from the process environment regardless.
	Getenv func(string) string
	// SpanProcessors are added to the provider next to the OTLP batch
	// processor (tests use them to watch what is exported).
	SpanProcessors []sdktrace.SpanProcessor
}

// Settings is what the environment asks for.
type Settings struct {
	// Enabled is true when spans are to be exported.
	Enabled bool
	// Protocol is ProtocolGRPC or ProtocolHTTPProtobuf.
	Protocol string
	// Endpoint is the endpoint variable that applies (the traces-specific
	// one first), as given; empty when Enabled is false.
	Endpoint string
}

// Resolve reads the environment through getenv (nil is os.Getenv), the
// exporter and protocol names in any case, as the specification's enum
// values are. An unknown protocol or exporter name is an error, so that a
// typo does not silently turn tracing off; so is, when export is on, an
// unknown OTEL_TRACES_SAMPLER or an OTEL_TRACES_SAMPLER_ARG that is not a
// ratio from 0 to 1, which the SDK would replace with sampling every trace.
func Resolve(getenv func(string) string) (Settings, error) {
	return resolve(getenv, DefaultProtocol)
}

// resolve is Resolve with the protocol to use when the environment names
// none.
func resolve(getenv func(string) string, protocol string) (Settings, error) {
	getenv = getenvOr(getenv)
	var s Settings
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return s, nil
	}
	// Enum values are case-insensitive (the specification's environment
	// variables: "Enum values SHOULD be interpreted in a case-insensitive
	// manner"), as the SDK reads OTEL_TRACES_SAMPLER.
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "", "otlp":
	case "none":
		return s, nil
	default:
		return s, fmt.Errorf("otlpenv: OTEL_TRACES_EXPORTER=%q: only \"otlp\" and \"none\" are supported", exp)
	}
	s.Endpoint = firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if s.Endpoint == "" {
		return s, nil
	}
	s.Protocol = strings.ToLower(firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"))
	switch s.Protocol {
	case "":
		s.Protocol = protocol
	case ProtocolGRPC, ProtocolHTTPProtobuf:
	default:
		return Settings{}, fmt.Errorf("otlpenv: OTLP protocol %q is not supported: use %q or %q", s.Protocol, ProtocolGRPC, ProtocolHTTPProtobuf)
	}
	if err := checkSampler(getenv); err != nil {
		return Settings{}, err
	}
	s.Enabled = true
	return s, nil
}

// getenvOr returns getenv, or os.Getenv when it is nil.
func getenvOr(getenv func(string) string) func(string) string {
	if getenv == nil {
		return os.Getenv
	}
	return getenv
}

func firstSet(getenv func(string) string, keys ...string) string {
	for _, k := range keys {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
	}
	return ""
}

// NewTracerProvider returns a provider exporting to the OTLP endpoint the
// environment names, through a batch span processor, or nil (and no error)
// when the environment asks for no export. The caller must Shutdown the
// provider: Shutdown flushes the spans still batched. ctx bounds the
// construction only (the exporters connect lazily).
func NewTracerProvider(ctx context.Context, cfg Config, opts Options) (*sdktrace.TracerProvider, Settings, error) {
	protocol := cfg.Protocol
	switch protocol {
	case "":
		protocol = DefaultProtocol
	case ProtocolGRPC, ProtocolHTTPProtobuf:
	default:
		return nil, Settings{}, fmt.Errorf("otlpenv: Config.Protocol %q is not supported: use %q or %q", protocol, ProtocolGRPC, ProtocolHTTPProtobuf)
	}
	if !(cfg.SampleRatio >= 0 && cfg.SampleRatio <= 1) {
		return nil, Settings{}, fmt.Errorf("otlpenv: Config.SampleRatio %v is not a ratio from 0 to 1", cfg.SampleRatio)
	}
	s, err := resolve(opts.Getenv, protocol)
	if err != nil || !s.Enabled {
		return nil, s, err
	}
	var exp sdktrace.SpanExporter
	switch s.Protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, s, fmt.Errorf("otlpenv: %s exporter: %w", s.Protocol, err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	// Later options win: the environment's service.name over the default.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", name)), resource.WithFromEnv())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, s, fmt.Errorf("otlpenv: resource: %w", err)
	}
	tpo := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if cfg.SampleRatio > 0 && strings.TrimSpace(getenvOr(opts.Getenv)("OTEL_TRACES_SAMPLER")) == "" {
		// Without the variable the SDK would sample every trace; with it,
		// the SDK's reading of the environment stands.
		tpo = append(tpo, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))))
	}
	for _, sp := range opts.SpanProcessors {
		tpo = append(tpo, sdktrace.WithSpanProcessor(sp))
	}
	return sdktrace.NewTracerProvider(tpo...), s, nil
}
