package telemetry

import (
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Set is the observability a component is built with. Embed it in a
// package's Options; its zero value is valid (see the package doc).
type Set struct {
	// Registerer receives the component's metrics; nil registers none (the
	// metrics still count, they are just not exported).
	Registerer prometheus.Registerer `json:"-"`
	// Logger receives the component's logs; nil discards them.
	Logger *slog.Logger `json:"-"`
	// TracerProvider supplies the component's tracer; nil traces nothing.
	TracerProvider trace.TracerProvider `json:"-"`
	// Clock is the component's time source for timestamps, timeouts and
	// periodic work; nil is the wall clock.
	Clock Clock `json:"-"`
}

// discard is the logger of a Set without one. Its handler is disabled at
// every level, so a component built without a logger does not even format
// the records it would log.
var discard = slog.New(slog.DiscardHandler)

// Log returns the Set's logger, or one that discards.
func (s Set) Log() *slog.Logger {
	if s.Logger == nil {
		return discard
	}
	return s.Logger
}

// Tracer returns the named tracer of the Set's provider, or a no-op tracer.
func (s Set) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	if s.TracerProvider == nil {
		return noop.NewTracerProvider().Tracer(name, opts...)
	}
	return s.TracerProvider.Tracer(name, opts...)
}

// Clk returns the Set's clock, or Wall.
func (s Set) Clk() Clock {
	if s.Clock == nil {
		return Wall
	}
	return s.Clock
}

// Now returns the current time on the Set's clock.
func (s Set) Now() time.Time { return s.Clk().Now() }

// Register registers cs with the Set's registerer, all or none: if one
// fails, those this call registered are unregistered and the error is
// returned. Without a registerer it does nothing.
func (s Set) Register(cs ...prometheus.Collector) error {
	if s.Registerer == nil {
		return nil
	}
	for i, c := range cs {
		if err := s.Registerer.Register(c); err != nil {
			for _, done := range cs[:i] {
				s.Registerer.Unregister(done)
			}
			return err
		}
	}
	return nil
}

// Unregister unregisters cs from the Set's registerer (a component's Close
// calls it with what New registered). It reports whether every collector
// was registered.
func (s Set) Unregister(cs ...prometheus.Collector) bool {
	if s.Registerer == nil {
		return true
	}
	all := true
	for _, c := range cs {
		all = s.Registerer.Unregister(c) && all
	}
	return all
}

// With returns a copy of s whose registerer adds labels to every metric and
// whose logger carries them as attributes; labels must be valid Prometheus
// label names and values (the caller validates them).
func (s Set) With(labels prometheus.Labels) Set {
	if len(labels) == 0 {
		return s
	}
	if s.Registerer != nil {
		s.Registerer = prometheus.WrapRegistererWith(labels, s.Registerer)
	}
	if s.Logger != nil {
		args := make([]any, 0, 2*len(labels))
		for k, v := range labels {
			args = append(args, k, v)
		}
		s.Logger = s.Logger.With(args...)
	}
	return s
}

// IsAlreadyRegistered reports whether err is Prometheus's
// AlreadyRegisteredError, the error Register returns when a second
// component registers the same metrics on one registry.
func IsAlreadyRegistered(err error) bool {
	var are prometheus.AlreadyRegisteredError
	return errors.As(err, &are)
}
