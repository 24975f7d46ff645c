package enginemetrics

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestSaturationFollowsThresholds(t *testing.T) {
	var body atomic.Value
	body.Store(metricsPage(0, 1, 0.1))
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { page(body.Load().(string))(w, r) })
	cfg := manualConfig()
	cfg.WaitingThreshold, cfg.KVCacheThreshold = 3, 0.9
	s, clk, _ := newScraper(t, cfg)
	ep := endpointOf(srv)
	sat, known := s.Saturation(ep)
	require.False(t, known, "never scraped")
	require.False(t, sat)

	s.SetEndpoints([]kvroute.Endpoint{ep})
	waitScrapes(t, s, ep, 1) // a new endpoint is scraped at once
	sig, ok := s.Signal(ep)
	require.True(t, ok)
	require.Equal(t, Signal{Waiting: 0, Running: 1, KVCacheUsage: 0.1, Scraped: t0}, sig)
	sat, known = s.Saturation(ep)
	require.True(t, known)
	require.False(t, sat)

	for _, tc := range []struct {
		page string
		want bool
	}{
		{metricsPage(2, 4, 0.89), false},
		{metricsPage(3, 4, 0.1), true}, // waiting reaches its threshold
		{metricsPage(0, 4, 0.9), true}, // KV-cache usage reaches its threshold
		{metricsPage(0, 0, 0), false},
	} {
		body.Store(tc.page)
		scrapeAgain(t, s, clk, ep)
		sat, known = s.Saturation(ep)
		require.True(t, known)
		require.Equal(t, tc.want, sat, tc.page)
	}

	// The request path reads a snapshot: no allocation.
	require.Zero(t, testing.AllocsPerRun(100, func() { s.Saturation(ep) }))

	// Negative thresholds ignore their signal.
	cfg.WaitingThreshold, cfg.KVCacheThreshold = -1, -1
	s2, _, _ := newScraper(t, cfg)
	body.Store(metricsPage(1000, 4, 1))
	s2.SetEndpoints([]kvroute.Endpoint{ep})
	waitScrapes(t, s2, ep, 1)
	sat, known = s2.Saturation(ep)
	require.True(t, known)
	require.False(t, sat)
}

// A signal older than the staleness limit is unknown, never idle (here the
// next scrape hangs, so the last one ages past the limit); the next
// scrape makes it known again. A failed scrape makes it unknown at once.
func TestStaleAndFailedSignalsAreUnknown(t *testing.T) {
	var fail, hang atomic.Bool
	hung, unhang := make(chan struct{}, 1), make(chan struct{})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			hung <- struct{}{}
			<-unhang
		}
		if fail.Load() {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		page(metricsPage(0, 0, 0))(w, r)
	})
	cfg := manualConfig()
	cfg.Interval, cfg.Staleness = 600*time.Millisecond, time.Second
	s, clk, _ := newScraper(t, cfg)
	ep := endpointOf(srv)
	s.SetEndpoints([]kvroute.Endpoint{ep})
	waitScrapes(t, s, ep, 1)
	_, known := s.Saturation(ep)
	require.True(t, known)

	hang.Store(true)
	tg := (*s.targets.Load())[ep.ID]
	require.Eventually(t, func() bool { return !tg.inflight.Load() }, 20*time.Second, time.Millisecond)
	clk.Advance(cfg.Interval) // the next scrape starts, and hangs
	<-hung
	clk.Advance(time.Second - cfg.Interval)
	_, known = s.Saturation(ep)
	require.True(t, known, "exactly the staleness limit is still fresh")
	clk.Advance(time.Nanosecond)
	sat, known := s.Saturation(ep)
	require.False(t, known, "stale")
	require.False(t, sat)
	sig, ok := s.Signal(ep)
	require.False(t, ok)
	require.Equal(t, t0, sig.Scraped, "the stale signal is still returned, with its age")

	hang.Store(false)
	close(unhang) // the hung scrape completes
	waitScrapes(t, s, ep, 2)
	_, known = s.Saturation(ep)
	require.True(t, known)
	scrapeAgain(t, s, clk, ep)
	_, known = s.Saturation(ep)
	require.True(t, known)

	fail.Store(true)
	scrapeAgain(t, s, clk, ep)
	_, known = s.Saturation(ep)
	require.False(t, known, "the last scrape failed")
	require.Equal(t, 1.0, failures(s, ep, reasonStatus))
}

// Every kind of broken endpoint is counted under its reason and leaves its
// signal unknown, while a healthy endpoint scraped alongside stays known.
func TestBrokenEndpointsAreCountedByReason(t *testing.T) {
	huge := strings.Repeat("# padding line of a page far larger than allowed\n", 100) + metricsPage(0, 0, 0)
	cases := map[string]kvroute.Endpoint{
		reasonStatus:   endpointOf(serve(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", 500) })),
		reasonParse:    endpointOf(serve(t, page("vllm:num_requests_waiting{engine=0 1\n"))),
		reasonMissing:  endpointOf(serve(t, page("<html><body>Welcome to nginx!</body></html>\n"))),
		reasonBadValue: endpointOf(serve(t, page(strings.Replace(metricsPage(0, 0, 0), "} 0\n", "} NaN\n", 1)))),
		reasonTooLarge: endpointOf(serve(t, page(huge))),
		"too_large_2":  endpointOf(serve(t, chunked(huge))), // no Content-Length
	}
	// A server that hangs up on every connection before answering (a port
	// nothing listens on could be taken by another test's server).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	cases[reasonConnection] = kvroute.Endpoint{ID: l.Addr().String()}
	healthy := endpointOf(serve(t, page(metricsPage(9, 1, 0.5))))
	cfg := manualConfig()
	cfg.MaxBodyBytes = 1024
	s, _, reg := newScraper(t, cfg)
	eps := []kvroute.Endpoint{healthy}
	for _, ep := range cases {
		eps = append(eps, ep)
	}
	s.SetEndpoints(eps)
	for reason, ep := range cases {
		reason = strings.TrimSuffix(reason, "_2")
		waitScrapes(t, s, ep, 1)
		require.Equal(t, 1.0, failures(s, ep, reason), "%s: %s", reason, ep.ID)
		sat, known := s.Saturation(ep)
		require.False(t, known, reason)
		require.False(t, sat, reason)
	}
	waitScrapes(t, s, healthy, 1)
	sat, known := s.Saturation(healthy)
	require.True(t, known)
	require.True(t, sat)
	// Every endpoint has its own series: 8 endpoints × 7 reasons.
	n, err := testutil.GatherAndCount(reg, "kvroute_engine_metrics_scrape_failures_total")
	require.NoError(t, err)
	require.Equal(t, 8*len(reasons), n)
}

func chunked(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i < len(body); i += 512 {
			_, _ = w.Write([]byte(body[i:min(i+512, len(body))]))
			w.(http.Flusher).Flush()
		}
	}
}

// A server that never answers is cut at the timeout, on the Scraper's
// clock, and counted; it holds one concurrency slot only, so a healthy
// endpoint is still scraped.
func TestSlowEndpointTimesOut(t *testing.T) {
	entered := make(chan struct{}, 10)
	slow := endpointOf(serve(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-r.Context().Done()
	}))
	healthy := endpointOf(serve(t, page(metricsPage(0, 0, 0))))
	cfg := manualConfig()
	cfg.Concurrency = 2
	s, clk, _ := newScraper(t, cfg)
	s.SetEndpoints([]kvroute.Endpoint{slow, healthy})
	<-entered
	waitScrapes(t, s, healthy, 1)
	_, known := s.Saturation(healthy)
	require.True(t, known)
	require.Zero(t, scrapes(s, slow), "still in flight")

	clk.Advance(cfg.Timeout - time.Nanosecond)
	require.Zero(t, scrapes(s, slow))
	clk.Advance(time.Nanosecond)
	waitScrapes(t, s, slow, 1)
	require.Equal(t, 1.0, failures(s, slow, reasonTimeout))
	_, known = s.Saturation(slow)
	require.False(t, known)
}

// With a concurrency of one, a second endpoint waits for the first scrape's
// slot; a slow endpoint is never scraped twice at once.
func TestConcurrencyIsBounded(t *testing.T) {
	var inside, most atomic.Int32
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	h := func(w http.ResponseWriter, r *http.Request) {
		n := inside.Add(1)
		defer inside.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		entered <- struct{}{}
		<-release
		page(metricsPage(0, 0, 0))(w, r)
	}
	a, b := endpointOf(serve(t, h)), endpointOf(serve(t, h))
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the servers' Close, should the test fail
	cfg := manualConfig()
	cfg.Concurrency = 1
	cfg.Timeout = 2 * cfg.Interval
	s, clk, _ := newScraper(t, cfg)
	s.SetEndpoints([]kvroute.Endpoint{a, b})
	<-entered
	clk.Advance(cfg.Interval) // a tick while the first scrape is in flight
	require.Equal(t, int32(1), inside.Load())
	unblock()
	waitScrapes(t, s, a, 1)
	waitScrapes(t, s, b, 1)
	require.Equal(t, int32(1), most.Load())
}

// Endpoints that leave are dropped with their signal and their series.
func TestSetEndpointsDropsLeavers(t *testing.T) {
	a := endpointOf(serve(t, page(metricsPage(0, 0, 0))))
	b := endpointOf(serve(t, page(metricsPage(7, 0, 0))))
	s, _, reg := newScraper(t, manualConfig())
	s.SetEndpoints([]kvroute.Endpoint{a, b, {ID: ""}, {ID: "\xff:1"}})
	waitScrapes(t, s, a, 1)
	waitScrapes(t, s, b, 1)
	require.Equal(t, 2.0, testutil.ToFloat64(s.m.endpoints), "invalid IDs are skipped")
	s.SetEndpoints([]kvroute.Endpoint{a})
	_, known := s.Saturation(b)
	require.False(t, known)
	_, known = s.Saturation(a)
	require.True(t, known, "an endpoint that stays keeps its signal")
	n, err := testutil.GatherAndCount(reg, "kvroute_engine_metrics_scrapes_total", "kvroute_engine_metrics_scrape_failures_total")
	require.NoError(t, err)
	require.Equal(t, 1+len(reasons), n, "only a's series remain")
}

// Close ends scrapes in flight and the loop; no goroutine is left, on the
// wall clock as on a manual one.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	defer leakcheck.Check(t)()
	entered := make(chan struct{}, 10)
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	}))
	defer srv.Close()
	defer close(hang)
	good := httptest.NewServer(page(metricsPage(0, 0, 0)))
	defer good.Close()
	for _, clk := range []telemetry.Clock{nil, telemetry.NewManual(t0)} {
		s, err := New(Config{Interval: time.Millisecond, Timeout: time.Hour}, Options{Set: telemetry.Set{Clock: clk}})
		require.NoError(t, err)
		s.SetEndpoints([]kvroute.Endpoint{endpointOf(srv), endpointOf(good)})
		<-entered
		waitScrapes(t, s, endpointOf(good), 1)
		s.Close()
		s.Close() // idempotent
	}
}

func TestConfig(t *testing.T) {
	c, err := LoadConfig(strings.NewReader(`{"interval":"100ms","staleness":"1s","waitingThreshold":3,"kvCacheThreshold":0.95}`))
	require.NoError(t, err)
	require.Equal(t, Config{Interval: 100 * time.Millisecond, Staleness: time.Second, WaitingThreshold: 3, KVCacheThreshold: 0.95}, c)
	_, err = LoadConfig(strings.NewReader(`{"interval":100}`))
	require.ErrorContains(t, err, "interval")
	_, err = LoadConfig(strings.NewReader(`{"intervall":"1s"}`))
	require.ErrorContains(t, err, "intervall: unknown key")
	_, err = LoadConfig(strings.NewReader(`{"interval":"-1s"}`)) // LoadConfig validates
	require.ErrorContains(t, err, "interval -1s is negative")

	d, err := Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, Config{Interval: DefaultInterval, Staleness: DefaultStaleness, Timeout: DefaultTimeout, Path: DefaultPath,
		MaxBodyBytes: DefaultMaxBodyBytes, Concurrency: DefaultConcurrency, WaitingThreshold: DefaultWaitingThreshold,
		KVCacheThreshold: DefaultKVCacheThreshold}, d)
	for _, bad := range []Config{{Interval: -1}, {Staleness: -1}, {Timeout: -1}, {Path: "metrics"}, {MaxBodyBytes: -1},
		{Concurrency: -1}, {KVCacheThreshold: 1.5}} {
		_, err := New(bad, Options{})
		require.Error(t, err, "%+v", bad)
	}
}

// A scrape interval not shorter than the staleness bound is refused: every
// signal would go stale before the next scrape replaced it, and the
// admission would judge every engine as unknown for part or all of each
// interval. Zero fields take their defaults first, so an interval alone
// of 200ms or more is refused against the default staleness.
func TestConfigRefusesAnIntervalNotShorterThanTheStaleness(t *testing.T) {
	for _, bad := range []Config{{Interval: time.Second}, {Interval: DefaultStaleness}, {Staleness: DefaultInterval},
		{Interval: time.Second, Staleness: 500 * time.Millisecond}} {
		_, err := New(bad, Options{})
		require.ErrorContains(t, err, "not shorter than staleness", "%+v", bad)
	}
	_, err := LoadConfig(strings.NewReader(`{"interval":"1s"}`))
	require.ErrorContains(t, err, "interval 1s is not shorter than staleness 200ms")
	_, err = LoadConfig(strings.NewReader(`{"interval":"1s","staleness":"3s"}`))
	require.NoError(t, err)
	_, err = LoadConfig(strings.NewReader(`{"staleness":"60ms"}`))
	require.NoError(t, err, "above the default interval")
}

// The scrape goes to the configured path of the endpoint's Address.
func TestPathAndAddress(t *testing.T) {
	srv := serve(t, page(""))
	mux := http.NewServeMux()
	mux.HandleFunc("/engine/stats", page(metricsPage(4, 0, 0)))
	srv.Config.Handler = mux
	cfg := manualConfig()
	cfg.Path = "/stats"
	s, _, _ := newScraper(t, cfg)
	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	ep := kvroute.Endpoint{ID: "engine-a", Address: "http://" + net.JoinHostPort(host, port) + "/engine/"}
	s.SetEndpoints([]kvroute.Endpoint{ep})
	waitScrapes(t, s, ep, 1)
	sig, ok := s.Signal(ep)
	require.True(t, ok)
	require.Equal(t, 4, sig.Waiting)
}

// A redirect is never followed, with the Scraper's own client or one given
// in Options: the scrape fails as http_status, the redirect's target is
// never contacted, and its gauges never become the endpoint's signal.
func TestScrapeFollowsNoRedirect(t *testing.T) {
	for _, given := range []*http.Client{nil, {}} {
		name := "own client"
		if given != nil {
			name = "given client"
		}
		t.Run(name, func(t *testing.T) {
			var hits atomic.Int32
			other := serve(t, func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				page(metricsPage(0, 0, 0))(w, r)
			})
			engine := serve(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+"/metrics", http.StatusFound)
			})
			s, err := New(manualConfig(), Options{Set: telemetry.Set{Clock: telemetry.NewManual(t0)}, Client: given})
			require.NoError(t, err)
			t.Cleanup(s.Close)
			ep := endpointOf(engine)
			s.SetEndpoints([]kvroute.Endpoint{ep})
			waitScrapes(t, s, ep, 1)
			failure, completed := s.LastScrape(ep)
			require.True(t, completed)
			require.Equal(t, reasonStatus, failure)
			require.Zero(t, hits.Load(), "the redirect's target was scraped")
			_, fresh := s.Signal(ep)
			require.False(t, fresh)
			if given != nil {
				require.Nil(t, given.CheckRedirect, "the caller's client is not changed")
			}
		})
	}
}

// A path that cannot end a URL (an invalid escape, a control character) is
// refused with the configuration, naming the key: it used to be accepted
// and then fail every scrape of every endpoint, counted as connection.
func TestConfigRejectsAPathThatIsNotAURLPath(t *testing.T) {
	for _, p := range []string{`"/metrics%zz"`, `"/metrics\u0000"`, `"/metrics\n"`} {
		_, err := LoadConfig(strings.NewReader(`{"path":` + p + `}`))
		require.ErrorContains(t, err, "path", p)
	}
	_, err := LoadConfig(strings.NewReader(`{"path":"/engine/metrics?format=text"}`))
	require.NoError(t, err)
}
