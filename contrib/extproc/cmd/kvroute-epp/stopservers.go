package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc"
)

// How the picker stops its servers once the drain window (--drain-timeout)
// is over: ext_proc's streams may finish for --shutdown-timeout, then are
// cut; the health server stops at once; the metrics port's requests may
// finish for --metrics-shutdown-timeout, then are cut. Last, with
// --tracing, the spans still batched are exported for at most
// --tracing-flush-timeout (tracing.go). The pod's
// terminationGracePeriodSeconds must cover the drain window and the three,
// with a few seconds over for writing the index checkpoint (the chart
// requires 5s).

const (
	// defaultShutdownTimeout is how long ext_proc's streams in flight may
	// finish after the drain window (--shutdown-timeout): a request's
	// stream ends with its response, so most are done well within it.
	defaultShutdownTimeout = 10 * time.Second
	// defaultMetricsShutdownTimeout is how long the metrics port's
	// requests in flight may finish (--metrics-shutdown-timeout): a scrape
	// takes well under it, and a long pprof profile is cut.
	defaultMetricsShutdownTimeout = 5 * time.Second
	// defaultTracingFlushTimeout is how long the spans still batched at
	// exit may take to export (--tracing-flush-timeout): a collector that
	// answers takes well under it, and one that does not costs no more.
	defaultTracingFlushTimeout = 10 * time.Second
)

// stopTimeouts bounds how long stopServers waits for each server's
// requests in flight, and the final export of spans; a zero field is its
// default.
type stopTimeouts struct {
	grpc    time.Duration // --shutdown-timeout
	metrics time.Duration // --metrics-shutdown-timeout
	tracing time.Duration // --tracing-flush-timeout
}

// addStopFlags defines the flags setting s on fs.
func addStopFlags(fs *flag.FlagSet, s *stopTimeouts) {
	fs.DurationVar(&s.grpc, "shutdown-timeout", 0, fmt.Sprintf("on SIGTERM, after --drain-timeout: how long ext_proc's streams in flight may finish before they are cut (0: %v)", defaultShutdownTimeout))
	fs.DurationVar(&s.metrics, "metrics-shutdown-timeout", 0, fmt.Sprintf("on SIGTERM, after ext_proc has stopped: how long the metrics port's requests in flight (a scrape, a pprof profile) may finish before they are cut (0: %v)", defaultMetricsShutdownTimeout))
	fs.DurationVar(&s.tracing, "tracing-flush-timeout", 0, fmt.Sprintf("with --tracing, at exit after the servers have stopped: how long the spans still batched may take to export to the collector before they are dropped (0: %v)", defaultTracingFlushTimeout))
}

// check refuses negative timeouts.
func (s stopTimeouts) check() error {
	switch {
	case s.grpc < 0:
		return fmt.Errorf("--shutdown-timeout %v is negative", s.grpc)
	case s.metrics < 0:
		return fmt.Errorf("--metrics-shutdown-timeout %v is negative", s.metrics)
	case s.tracing < 0:
		return fmt.Errorf("--tracing-flush-timeout %v is negative", s.tracing)
	}
	return nil
}

// withDefaults is s with each zero field set to its default.
func (s stopTimeouts) withDefaults() stopTimeouts {
	if s.grpc == 0 {
		s.grpc = defaultShutdownTimeout
	}
	if s.metrics == 0 {
		s.metrics = defaultMetricsShutdownTimeout
	}
	if s.tracing == 0 {
		s.tracing = defaultTracingFlushTimeout
	}
	return s
}

// stopServers stops the ext_proc server gs gracefully, cutting its streams
// still open after t.grpc, then the health server hs, then the metrics
// server ms, cutting its requests still running after t.metrics (zero
// fields: the defaults).
func stopServers(gs, hs *grpc.Server, ms *http.Server, t stopTimeouts) {
	t = t.withDefaults()
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	timer := time.NewTimer(t.grpc)
	select {
	case <-done:
	case <-timer.C:
		gs.Stop()
		<-done
	}
	timer.Stop()
	hs.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), t.metrics)
	defer cancel()
	if ms.Shutdown(ctx) != nil {
		// A request still running (a long pprof profile, a stalled
		// scraper) is cut: Shutdown leaves its connection, and the
		// handler's goroutine, to the caller otherwise.
		_ = ms.Close()
	}
}
