package sim

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// progressKey carries a progress reporter in a context.
type progressKey struct{}

// progress prints how many runs of a batch are done, at most once per
// interval and once at the end, so that a sweep of minutes is not silent.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	label    string
	interval time.Duration
	last     time.Time
}

// WithProgress returns a context under which every batch of runs (Sweep,
// ReplicaSweep, SeedSweep, the peer seeds) prints its progress to w as
// "label: n/total runs done (last: what), elapsed".
func WithProgress(ctx context.Context, w io.Writer, label string) context.Context {
	return context.WithValue(ctx, progressKey{}, &progress{w: w, label: label, interval: 2 * time.Second})
}

// batchProgress returns the reporter of one batch of total runs under ctx,
// called once per finished run; without WithProgress it reports nothing.
func batchProgress(ctx context.Context, total int) func(what string) {
	p, _ := ctx.Value(progressKey{}).(*progress)
	if p == nil {
		return func(string) {}
	}
	start := time.Now()
	p.mu.Lock()
	fmt.Fprintf(p.w, "%s: %d runs ...\n", p.label, total)
	p.last = start
	p.mu.Unlock()
	n := 0
	return func(what string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		n++
		now := time.Now()
		if n < total && now.Sub(p.last) < p.interval {
			return
		}
		p.last = now
		fmt.Fprintf(p.w, "%s: %d/%d runs done (last: %s), %v\n", p.label, n, total, what, now.Sub(start).Round(100*time.Millisecond))
	}
}
