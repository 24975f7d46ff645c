package admission

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

func newTracker(t *testing.T) *tokenload.Tracker {
	t.Helper()
	tr, err := tokenload.NewTracker(tokenload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTokenDetectorComparesInflightPrefillWithTheBacklog(t *testing.T) {
	tr := newTracker(t)
	d := NewTokenDetector(Saturation{MaxPrefillBacklog: time.Second, PeakPrefillThroughput: 1000}, tr)
	ep := kvroute.Endpoint{ID: "a:1"}
	if s, known := d.Saturation(ep); s || !known {
		t.Fatalf("unseen endpoint: saturated %v known %v", s, known)
	}
	h := tr.Dispatch("a:1", 999)
	if s, _ := d.Saturation(ep); s {
		t.Fatal("999 of 1000 tokens saturated")
	}
	h2 := tr.Dispatch("a:1", 1)
	if s, _ := d.Saturation(ep); !s {
		t.Fatal("1000 of 1000 tokens not saturated")
	}
	h.FirstChunk() // prefill done: the tokens are released
	if s, _ := d.Saturation(ep); s {
		t.Fatal("saturated after the first chunk")
	}
	h.Done()
	h2.Done()
}

func TestTokenDetectorConcurrencyThreshold(t *testing.T) {
	tr := newTracker(t)
	d := NewTokenDetector(Saturation{MaxPrefillBacklog: -1, MaxOpenRequests: 2}, tr)
	ep := kvroute.Endpoint{ID: "a:1"}
	h1, h2 := tr.Dispatch("a:1", 1e9), tr.Dispatch("a:1", 0)
	if s, _ := d.Saturation(ep); !s {
		t.Fatal("2 of 2 open requests not saturated")
	}
	h1.Done()
	if s, _ := d.Saturation(ep); s {
		t.Fatal("1 of 2 open requests saturated (and the token threshold is off)")
	}
	h2.Done()
}

func TestEngineSignalAddsSaturationAndStaleFallsBackToOwnAccounting(t *testing.T) {
	tr := newTracker(t)
	eng := newSwitch()
	c, err := New(Config{Saturation: Saturation{MaxPrefillBacklog: -1, MaxOpenRequests: 1}},
		Options{Detectors: []Detector{eng}, Load: tr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ep := kvroute.Endpoint{ID: "a:1"}
	if c.saturated(ep) {
		t.Fatal("idle endpoint without engine signal saturated")
	}
	eng.set("a:1", true)
	if !c.saturated(ep) {
		t.Fatal("fresh engine saturation ignored")
	}
	eng.forget("a:1") // the scrape went stale
	if c.saturated(ep) {
		t.Fatal("stale engine signal used")
	}
	h := tr.Dispatch("a:1", 0)
	eng.set("a:1", false)
	if !c.saturated(ep) {
		t.Fatal("an idle engine signal hid the own accounting's saturation")
	}
	h.Done()
}

func TestClaimHoldsBackTheQueueUntilThePickShows(t *testing.T) {
	tr := newTracker(t)
	f := newFixture(t, Config{Saturation: Saturation{MaxPrefillBacklog: -1, MaxOpenRequests: 2}})
	f.c.SetLoad(tr)
	busy1, busy2 := tr.Dispatch("a:1", 0), tr.Dispatch("a:1", 0)
	out := make(chan result, 2)
	f.admit(t, context.Background(), "r1", tokensReq(10), oneEP, out)
	f.admit(t, context.Background(), "r2", tokensReq(10), oneEP, out)
	busy1.Done()
	f.c.Notify("")
	if r := take(t, out); r.tag != "r1" {
		t.Fatalf("got %s, want r1", r.tag)
	}
	f.c.Notify("") // a:1 has room for one, and r1 claimed it
	if f.c.Queued() != 1 {
		t.Fatal("one release let two requests through")
	}
	r1 := tr.Dispatch("a:1", 0) // r1's pick commits: a:1 is full again
	f.c.Notify("")
	if f.c.Queued() != 1 {
		t.Fatal("r2 left for a saturated endpoint")
	}
	r1.Done()
	f.c.Notify("a:1")
	if r := take(t, out); r.tag != "r2" {
		t.Fatalf("got %s, want r2", r.tag)
	}
	busy2.Done()
}

// endSignal is a request's accounting handle whose first Done closes
// ended: a test waits on it for the request table's expiry timer.
type endSignal struct {
	*tokenload.Inflight
	once  sync.Once
	ended chan struct{}
}

func (h *endSignal) Done() {
	h.Inflight.Done()
	h.once.Do(func() { close(h.ended) })
}

// A request whose Done the host lost saturates its endpoint with phantom
// load only until the request table's TTL: the table releases it on its
// own timer, so the endpoint is admitted to again although no pick
// committed, and so nothing was registered, meanwhile (with the phantom
// load saturating the only endpoint, none could). The table used to expire
// entries only in Register, and the endpoint stayed locked out.
func TestPhantomLoadOfALostRequestStopsSaturatingAfterTheTableTTL(t *testing.T) {
	clock := telemetry.NewManual(t0)
	load := newTracker(t)
	tab, err := tokenload.NewRequestTable(tokenload.RequestTableConfig{TTL: time.Minute},
		tokenload.Options{Set: telemetry.Set{Clock: clock}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tab.Close)
	lost := &endSignal{Inflight: load.Dispatch("a:1", 1500), ended: make(chan struct{})}
	if err := tab.Register("lost", lost); err != nil { // its Done never comes
		t.Fatal(err)
	}
	c, err := New(Config{Objectives: gateObjectives, Saturation: Saturation{MaxPrefillBacklog: time.Second, PeakPrefillThroughput: 1000}},
		Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Clock: clock}, Load: load})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Admit(ctxFor("batch", ""), tokensReq(10), oneEP); !errors.Is(err, ErrShed) {
		t.Fatalf("Admit under 1,500 phantom tokens (threshold 1,000): %v, want ErrShed", err)
	}
	clock.Advance(time.Minute)
	select {
	case <-lost.ended:
	case <-time.After(20 * time.Second):
		tok, _, _ := load.Load("a:1")
		t.Fatalf("a:1 still carries %d phantom tokens a TTL after the lost Done", tok)
	}
	if err := c.Admit(ctxFor("batch", ""), tokensReq(10), oneEP); err != nil {
		t.Fatalf("Admit after the TTL released the phantom load: %v, want nil", err)
	}
}

// The engines' scraper is a Detector.
var _ Detector = (*enginemetrics.Scraper)(nil)

// A threshold beyond int64's range ("practically unlimited") is clamped to
// math.MaxInt64 instead of wrapping to 1 token, which would saturate every
// endpoint carrying any load; a tiny one is at least 1 token.
func TestTokenThresholdBeyondInt64IsClampedNotWrapped(t *testing.T) {
	cfg := Config{Saturation: Saturation{MaxPrefillBacklog: 1000 * time.Hour, PeakPrefillThroughput: 1e16}} // 3.6e22 tokens
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	tr := newTracker(t)
	d := NewTokenDetector(cfg.Saturation, tr)
	if d.MaxTokens() != math.MaxInt64 {
		t.Fatalf("MaxTokens = %d for a threshold of 3.6e22 tokens, want math.MaxInt64", d.MaxTokens())
	}
	h := tr.Dispatch("a:1", 1<<40)
	defer h.Done()
	if s, _ := d.Saturation(kvroute.Endpoint{ID: "a:1"}); s {
		t.Fatal("an endpoint with 2^40 tokens in flight saturated under a 3.6e22-token threshold")
	}
	for _, c := range []struct {
		backlog    time.Duration
		throughput float64
		want       int64
	}{
		{time.Hour, math.MaxFloat64, math.MaxInt64},          // the product overflows to +Inf
		{time.Second, float64(math.MaxInt64), math.MaxInt64}, // exactly 2^63, one past the range
		{time.Second, 1 << 62, 1 << 62},
		{time.Millisecond, 100, 1}, // 0.1 token
	} {
		if got := NewTokenDetector(Saturation{MaxPrefillBacklog: c.backlog, PeakPrefillThroughput: c.throughput}, nil).MaxTokens(); got != c.want {
			t.Errorf("%v × %g: MaxTokens = %d, want %d", c.backlog, c.throughput, got, c.want)
		}
	}
}
