package admission

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/tokenload"
)

// Detector reports an endpoint's saturation. known is false when the detector has no fresh signal for
// the endpoint (never scraped, scrape failed, or older than its staleness limit): the admission then falls
// back to kvroute's own accounting for it. A stale signal never counts as idle.
type Detector interface {
	Saturation(ep kvroute.Endpoint) (saturated, known bool)
}

// TokenDetector is kvroute's own saturation accounting: an endpoint is
// saturated when the prefill tokens kvroute has in flight on it (this
// replica's and, with cluster sharing, the peers') would take
// Saturation.MaxPrefillBacklog at Saturation.PeakPrefillThroughput, the
// calibrated throughput the affinity filter's TTFT gate uses, or when its
// open requests reach Saturation.MaxOpenRequests. It reads the load
// tracker's atomic counters and does not allocate. Its signal is always
// known: an endpoint the tracker has never seen carries no load.
type TokenDetector struct {
	load      atomic.Pointer[tokenload.Tracker]
	maxTokens int64 // 0: token threshold off
	maxOpen   int64 // 0: concurrency threshold off
}

// NewTokenDetector returns a detector with cfg's thresholds (zero fields
// take their defaults) over load, which may be nil and set later with
// SetLoad: a Router's tracker exists only once the Router, built with the
// admission, does.
func NewTokenDetector(cfg Saturation, load *tokenload.Tracker) *TokenDetector {
	cfg = Config{Saturation: cfg}.withDefaults().Saturation
	d := &TokenDetector{maxOpen: cfg.MaxOpenRequests}
	if cfg.MaxPrefillBacklog > 0 {
		d.maxTokens = tokenThreshold(cfg.MaxPrefillBacklog.Seconds() * cfg.PeakPrefillThroughput)
	}
	d.load.Store(load)
	return d
}

// tokenThreshold converts the backlog in tokens to the detector's
// threshold: at least 1, and at most math.MaxInt64, which no endpoint's
// in-flight tokens reach (a float64 beyond int64's range converts to an
// arbitrary value, math.MinInt64 on amd64, which would make it 1).
func tokenThreshold(tokens float64) int64 {
	switch {
	case tokens >= math.MaxInt64: // float64(math.MaxInt64) is 2^63, out of range
		return math.MaxInt64
	case !(tokens >= 1): // NaN too (NewTokenDetector does not validate)
		return 1
	}
	return int64(tokens)
}

// SetLoad sets the tracker whose accounting the detector reads (a Router's
// Load()); nil makes every endpoint unsaturated.
func (d *TokenDetector) SetLoad(load *tokenload.Tracker) { d.load.Store(load) }

// MaxTokens returns the in-flight token threshold (0 when off).
func (d *TokenDetector) MaxTokens() int64 { return d.maxTokens }

// Saturation reports whether ep is at or above a threshold; known is true.
func (d *TokenDetector) Saturation(ep kvroute.Endpoint) (saturated, known bool) {
	load := d.load.Load()
	if load == nil {
		return false, true
	}
	tokens, open, _ := load.Load(ep.ID)
	return (d.maxTokens > 0 && tokens >= d.maxTokens) || (d.maxOpen > 0 && open >= d.maxOpen), true
}

// version returns a value that changes whenever ep's accounting moves
// (a dispatch or a release): claims taken on ep lapse when it does.
func (d *TokenDetector) version(ep string) (tokens, open int64) {
	load := d.load.Load()
	if load == nil {
		return 0, 0
	}
	tokens, open, _ = load.Load(ep)
	return tokens, open
}

// claim is an endpoint a queued request was just released to: until the
// request's pick shows in the endpoint's accounting (it moves), Settle
// passes, a release wakes the queue for it, the request's pick is known or
// failed (Hold, Abandon, with the request's record) or the request's
// context ends, no other queued request is released to it on its account.
type claim struct {
	tokens, open int64
	at           time.Time
	by           uint64 // the released request's sequence number
	// stop stops the watch of the request's context that drops the claim
	// when it ends; nil for a context that never ends. The claim owns the
	// watch: whatever drops the claim stops it, so a long-lived context
	// shared by many requests keeps no registration per request.
	stop func() bool
}
