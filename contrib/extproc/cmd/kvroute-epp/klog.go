package main

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// klogRoute is the writer main gives run for kvroute-epp's logs, and the
// way klog's lines join them: client-go (its leader election, for
// --ha-enable-leader-election) logs through klog, which on its own writes
// its own text format to stderr, outside --zap-encoder's lines. run hands
// the logger it builds on this writer (--zap-encoder's format,
// --log-level's level) to the route, and klog's lines go through it from
// then on; before that they are written as key=value text lines.
type klogRoute struct {
	io.Writer
	to atomic.Pointer[slog.Logger]
}

// klogTo is the route klog's lines take: the last routeKlog's.
var klogTo atomic.Pointer[klogRoute]

// klogOnce sets klog's logger once: klog's setter is not safe while
// anything logs through klog, so later routes are swapped under it.
var klogOnce sync.Once

// routeKlog sends klog's lines, from now on, to the logger run builds on
// the returned writer (w, for run's stderr). klog is process-wide: main
// calls it, before anything logs through klog; run, which tests call many
// times, does not.
func routeKlog(w io.Writer) io.Writer {
	r := &klogRoute{Writer: w}
	r.to.Store(newLogger(w, "console", slog.LevelInfo))
	klogTo.Store(r)
	klogOnce.Do(func() { klog.SetSlogLogger(slog.New(klogHandler{})) })
	return r
}

// followKlog makes klog's lines follow log when stderr is the route main
// made (routeKlog); otherwise it does nothing.
func followKlog(stderr io.Writer, log *slog.Logger) {
	if r, ok := stderr.(*klogRoute); ok {
		r.to.Store(log)
	}
}

// klogHandler is the slog handler klog logs through: it passes each line
// to the current route's logger, with the attributes and groups klog's
// logger added on the way (wrap, in order).
type klogHandler struct {
	wrap []func(slog.Handler) slog.Handler
}

// base is the current route's handler, nil when none is set.
func (klogHandler) base() slog.Handler {
	r := klogTo.Load()
	if r == nil {
		return nil
	}
	return r.to.Load().Handler()
}

func (h klogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	b := h.base()
	return b != nil && b.Enabled(ctx, level)
}

func (h klogHandler) Handle(ctx context.Context, rec slog.Record) error {
	b := h.base()
	if b == nil {
		return nil
	}
	for _, w := range h.wrap {
		b = w(b)
	}
	return b.Handle(ctx, rec)
}

func (h klogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return klogHandler{append(slices.Clip(h.wrap), func(b slog.Handler) slog.Handler { return b.WithAttrs(attrs) })}
}

func (h klogHandler) WithGroup(name string) slog.Handler {
	return klogHandler{append(slices.Clip(h.wrap), func(b slog.Handler) slog.Handler { return b.WithGroup(name) })}
}
