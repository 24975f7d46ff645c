package enginemetrics

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/telemetry"
)

// Signal is one engine's state as its last successful scrape reported it.
type Signal struct {
	// Waiting is vllm:num_requests_waiting: requests queued in the engine,
	// not yet running (new, or preempted back to the queue).
	Waiting int
	// Running is vllm:num_requests_running: requests in the engine's running
	// batch (at most its --max-num-seqs).
	Running int
	// KVCacheUsage is vllm:kv_cache_usage_perc, 0 to 1: the share of KV
	// blocks held by running requests.
	KVCacheUsage float64
	// LoRA is the engine's LoRA adapter state (vllm:lora_requests_info);
	// zero when the engine does not expose it.
	LoRA LoRAInfo
	// Cache is the engine's KV-cache capacity (vllm:cache_config_info);
	// zero when the engine does not expose it.
	Cache CacheInfo
	// Scraped is when the scrape completed, on the Scraper's clock.
	Scraped time.Time
}

// Options are a Scraper's injected dependencies; the zero value is valid.
type Options struct {
	// Set carries the registerer of the Scraper's metrics, its logger and
	// the clock its interval, timeouts and staleness run on.
	telemetry.Set
	// Client sends the scrapes; nil uses the Scraper's own, whose idle
	// connections Close closes. Its own Timeout, if any, applies on top of
	// Config.Timeout. The Scraper uses a copy of it that follows no
	// redirect, whatever the given client's CheckRedirect.
	Client *http.Client
}

// Scraper scrapes the Prometheus metrics of every endpoint it is given, on
// an interval, and keeps each one's latest Signal. Saturation and Signal
// read that snapshot without blocking, so they may be called on the request
// path. Its methods are safe for concurrent use.
//
// Ownership: New starts the loop goroutine (run), which starts one scrape
// goroutine per endpoint and round, at most Config.Concurrency at a time
// (sem) and never two for one endpoint (target.inflight). A scrape
// goroutine alone writes its target's last and good; readers load them
// atomically. mu serialises SetEndpoints, which replaces the targets map
// as a whole and pokes wake for the loop. Close closes stop (ending the
// loop, also while it waits for a scrape slot), cancels ctx (ending the
// scrapes in flight) and waits for the loop and every scrape through wg.
// The other fields are set by New and not written after.
type Scraper struct {
	cfg    Config
	set    telemetry.Set
	clk    telemetry.Clock
	client *http.Client
	own    *http.Transport // the Scraper's own transport, nil with Options.Client
	m      *metrics

	mu      sync.Mutex                         // serializes SetEndpoints
	targets atomic.Pointer[map[string]*target] // by endpoint ID; replaced, never changed

	sem       chan struct{}
	wake      chan struct{}
	stop      chan struct{}
	ctx       context.Context // cancelled by Close, ends scrapes in flight
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// target is one endpoint being scraped.
type target struct {
	ep       kvroute.Endpoint
	url      string
	m        targetMetrics
	last     atomic.Pointer[outcome] // nil until the first scrape completes
	good     atomic.Pointer[Signal]  // the last successful scrape's signal
	inflight atomic.Bool
	started  atomic.Bool // a scrape of it has been started (a wake skips it)
}

// outcome is a completed scrape: its signal, or its failure.
type outcome struct {
	sig    Signal
	reason string // "" on success
}

// New returns a Scraper with no endpoints and starts its loop; give it
// endpoints with SetEndpoints and stop it with Close.
func New(cfg Config, opts Options) (*Scraper, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Scraper{
		cfg: cfg, set: opts.Set, clk: opts.Clk(), m: newMetrics(),
		sem: make(chan struct{}, cfg.Concurrency), wake: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	if opts.Client != nil {
		c := *opts.Client
		s.client = &c
	} else {
		s.own = http.DefaultTransport.(*http.Transport).Clone()
		s.own.MaxIdleConnsPerHost = 2
		s.client = &http.Client{Transport: s.own}
	}
	// A redirect is an answer, never followed: following it would send the
	// scrape to an address that is not the endpoint's and count another
	// server's gauges as the endpoint's (the 3xx fails as http_status).
	s.client.CheckRedirect = refuseRedirect
	if err := s.set.Register(s.m.collectors()...); err != nil {
		return nil, fmt.Errorf("enginemetrics: registering metrics: %w", err)
	}
	empty := map[string]*target{}
	s.targets.Store(&empty)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.run()
	return s, nil
}

// refuseRedirect is the Scraper's client's CheckRedirect: the 3xx response
// itself is returned, its Location not followed.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// SetEndpoints replaces the endpoints scraped: new ones are scraped at once,
// those that left are dropped with their signal and metric series, and
// those that stay (same ID and URL) keep their signal. An endpoint whose ID
// is empty, too long or not UTF-8 is skipped and logged, since its ID is
// the endpoint label of the Scraper's metrics.
func (s *Scraper) SetEndpoints(eps []kvroute.Endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.targets.Load()
	next := make(map[string]*target, len(eps))
	added := false
	for _, ep := range eps {
		if ep.ID == "" || len(ep.ID) > 512 || !utf8.ValidString(ep.ID) {
			s.set.Log().Warn("engine metrics: endpoint skipped, its ID is not a valid label value", "id", ep.ID)
			continue
		}
		if _, dup := next[ep.ID]; dup {
			continue
		}
		url := ep.URL() + s.cfg.Path
		if t, ok := old[ep.ID]; ok && t.url == url && t.ep.Rank == ep.Rank {
			next[ep.ID] = t
			continue
		}
		next[ep.ID] = &target{ep: ep, url: url, m: s.m.forEndpoint(ep.ID)}
		added = true
	}
	for id := range old {
		if _, ok := next[id]; !ok {
			s.m.drop(id)
		}
	}
	s.targets.Store(&next)
	s.m.endpoints.Set(float64(len(next)))
	if added {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Saturation reports whether ep's engine is saturated: its waiting requests
// reach Config.WaitingThreshold or its KV-cache usage reaches
// Config.KVCacheThreshold. known is false when there is no fresh signal for
// ep: it was never scraped, its last scrape failed, or the last one is
// older than Config.Staleness. A stale signal never counts as idle.
func (s *Scraper) Saturation(ep kvroute.Endpoint) (saturated, known bool) {
	sig, ok := s.Signal(ep)
	if !ok {
		return false, false
	}
	return (s.cfg.WaitingThreshold >= 0 && sig.Waiting >= s.cfg.WaitingThreshold) ||
		(s.cfg.KVCacheThreshold >= 0 && sig.KVCacheUsage >= s.cfg.KVCacheThreshold), true
}

// Signal returns ep's last successfully scraped signal, and whether it is
// fresh by the rule of Saturation (scraped, last scrape successful, not
// older than Config.Staleness). A stale signal is still returned, with
// false, so that a status page can show its age.
func (s *Scraper) Signal(ep kvroute.Endpoint) (Signal, bool) {
	t := (*s.targets.Load())[ep.ID]
	if t == nil {
		return Signal{}, false
	}
	var sig Signal
	if g := t.good.Load(); g != nil {
		sig = *g
	}
	last := t.last.Load()
	if last == nil || last.reason != "" {
		return sig, false
	}
	return sig, s.clk.Now().Sub(last.sig.Scraped) <= s.cfg.Staleness
}

// Interval is the time between two scrapes of one endpoint
// (Config.Interval, defaults applied): how often a reader of the signals
// has something new to read.
func (s *Scraper) Interval() time.Duration { return s.cfg.Interval }

// LoRA returns ep's LoRA adapter state from its last successful scrape,
// and whether it is fresh by the rule of Saturation. It allocates nothing,
// so a scorer may call it for every candidate of every request; a stale
// state is still returned, with false.
func (s *Scraper) LoRA(ep kvroute.Endpoint) (LoRAInfo, bool) {
	t := (*s.targets.Load())[ep.ID]
	if t == nil {
		return LoRAInfo{}, false
	}
	g := t.good.Load()
	last := t.last.Load()
	if g == nil || last == nil || last.reason != "" {
		if g != nil {
			return g.LoRA, false
		}
		return LoRAInfo{}, false
	}
	return g.LoRA, s.clk.Now().Sub(last.sig.Scraped) <= s.cfg.Staleness
}

// LastScrape reports how ep's last completed scrape ended: completed is
// false when none has completed yet (ep was just added, or is unknown),
// and failure is the reason the last one failed (a reason label of
// kvroute_engine_metrics_scrape_failures_total: connection, timeout,
// http_status, ...), empty when it succeeded. It allocates nothing.
func (s *Scraper) LastScrape(ep kvroute.Endpoint) (failure string, completed bool) {
	t := (*s.targets.Load())[ep.ID]
	if t == nil {
		return "", false
	}
	last := t.last.Load()
	if last == nil {
		return "", false
	}
	return last.reason, true
}

// Close stops the loop, cancels the scrapes in flight and waits for them,
// and unregisters the metrics. It is idempotent.
func (s *Scraper) Close() {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.cancel()
		s.wg.Wait()
		if s.own != nil {
			s.own.CloseIdleConnections()
		}
		s.set.Unregister(s.m.collectors()...)
	})
}

// run scrapes every endpoint at start, on every tick of the interval and
// whenever SetEndpoints adds one.
func (s *Scraper) run() {
	defer s.wg.Done()
	tick := s.clk.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	onlyNew := false
	for {
		if !s.round(onlyNew) {
			return
		}
		select {
		case <-s.stop:
			return
		case <-tick.C():
			onlyNew = false
		case <-s.wake:
			onlyNew = true
		}
	}
}

// round starts a scrape of every endpoint not already being scraped (with
// onlyNew, of those never scraped: SetEndpoints' wake is for the endpoints
// it added, which an earlier round may already have started), at most
// Config.Concurrency at once. It returns false when Close was called.
func (s *Scraper) round(onlyNew bool) bool {
	for _, t := range *s.targets.Load() {
		if onlyNew && t.started.Load() {
			continue
		}
		if !t.inflight.CompareAndSwap(false, true) {
			continue
		}
		t.started.Store(true)
		select {
		case s.sem <- struct{}{}:
		case <-s.stop:
			t.inflight.Store(false)
			return false
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.sem; t.inflight.Store(false) }()
			s.scrape(t)
		}()
	}
	return true
}
