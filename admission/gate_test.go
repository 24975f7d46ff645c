package admission

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// fakeSignals are engine signals the test sets per endpoint.
type fakeSignals struct {
	mu    sync.Mutex
	sig   map[string]enginemetrics.Signal
	stale map[string]bool
}

func (s *fakeSignals) set(ep string, waiting int, kv float64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sig[ep] = enginemetrics.Signal{Waiting: waiting, KVCacheUsage: kv, Scraped: at}
	delete(s.stale, ep)
}

func (s *fakeSignals) Signal(ep kvroute.Endpoint) (enginemetrics.Signal, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sig, ok := s.sig[ep.ID]
	return sig, ok && !s.stale[ep.ID]
}

var gateObjectives = []Objective{{Name: "chat", Priority: 1}, {Name: "batch", Priority: -1}}

// gateFixture is a Controller with engine signals for its dispatch gate.
type gateFixture struct {
	*fixture
	sig *fakeSignals
}

func newGateFixture(t *testing.T, cfg Config) *gateFixture {
	t.Helper()
	if cfg.Objectives == nil {
		cfg.Objectives = gateObjectives
	}
	g := &gateFixture{fixture: &fixture{det: newSwitch(), clock: telemetry.NewManual(t0), reg: prometheus.NewRegistry()},
		sig: &fakeSignals{sig: map[string]enginemetrics.Signal{}, stale: map[string]bool{}}}
	c, err := New(cfg, Options{Set: telemetry.Set{Registerer: g.reg, Clock: g.clock}, Detectors: []Detector{g.det}, Signals: g.sig})
	if err != nil {
		t.Fatal(err)
	}
	g.c = c
	t.Cleanup(c.Close)
	return g
}

// hold runs Hold in a goroutine and waits until it returned or waits at
// the gate; the outcome goes to out.
func (g *gateFixture) hold(t *testing.T, ctx context.Context, tag string, ep kvroute.Endpoint, out chan<- result) {
	t.Helper()
	before := g.enqueued()
	returned := make(chan struct{})
	go func() {
		err := g.c.Hold(ctx, ep)
		close(returned)
		out <- result{tag, err}
	}()
	waitFor(t, func() bool {
		select {
		case <-returned:
			return true
		default:
			return g.enqueued() > before
		}
	})
}

func (g *gateFixture) gateCount(priority, outcome string) float64 {
	return testutil.ToFloat64(g.c.gateMet.WithLabelValues(priority, outcome))
}

// pending reports whether out holds no outcome yet.
func pending(out <-chan result) bool {
	select {
	case <-out:
		return false
	default:
		return true
	}
}

var epA = kvroute.Endpoint{ID: "a:1"}

func TestGateNeverHoldsHigherBands(t *testing.T) {
	g := newGateFixture(t, Config{})
	g.sig.set("a:1", 50, 1, t0) // a full engine
	for _, obj := range []string{"chat", ""} {
		if err := g.c.Hold(ctxFor(obj, "t"), epA); err != nil {
			t.Fatalf("objective %q: %v, want nil", obj, err)
		}
	}
	if g.c.Held() != 0 || len(g.c.gates) != 0 {
		t.Fatal("a request of priority >= 0 touched the gate")
	}
}

func TestGateHoldsSheddableUntilTheEngineHasHeadroom(t *testing.T) {
	g := newGateFixture(t, Config{})
	g.sig.set("a:1", 0, 0.95, t0) // KV cache above the default 0.9
	out := make(chan result, 1)
	g.hold(t, ctxFor("batch", ""), "b", epA, out)
	if g.c.Held() != 1 || !pending(out) {
		t.Fatal("sheddable request sent to an engine without KV headroom")
	}
	g.sig.set("a:1", 2, 0.5, t0.Add(time.Millisecond)) // KV freed, but 2 waiting
	g.c.Notify("a:1")
	if !pending(out) {
		t.Fatal("sent while 2 requests wait in the engine")
	}
	g.sig.set("a:1", 0, 0.5, t0.Add(2*time.Millisecond))
	g.c.Notify("a:1")
	if r := take(t, out); r.err != nil {
		t.Fatalf("err %v, want sent", r.err)
	}
	if g.gateCount("-1", "held") != 1 || g.gateCount("-1", "sent") != 1 || g.c.Held() != 0 {
		t.Fatal("held/sent not counted")
	}
}

func TestGateCountsWhatItSentSinceTheScrape(t *testing.T) {
	g := newGateFixture(t, Config{Headroom: Headroom{MaxWaiting: 2}})
	g.sig.set("a:1", 0, 0.1, t0)
	for range 2 {
		if err := g.c.Hold(ctxFor("batch", ""), epA); err != nil {
			t.Fatal(err)
		}
	}
	out := make(chan result, 1)
	g.hold(t, ctxFor("batch", ""), "third", epA, out)
	if !pending(out) {
		t.Fatal("a third request went out on a scrape that had room for two")
	}
	// The recheck alone releases it once a new scrape shows room.
	g.sig.set("a:1", 1, 0.1, t0.Add(time.Millisecond))
	g.clock.WaitForWaiters(2) // the recheck and the held request's deadline
	g.clock.Advance(DefaultRecheck)
	if r := take(t, out); r.err != nil {
		t.Fatalf("err %v, want sent", r.err)
	}
	if g.gateCount("-1", "passed") != 2 {
		t.Fatalf("passed %v, want 2", g.gateCount("-1", "passed"))
	}
}

func TestGateShedsBeyondMaxHeld(t *testing.T) {
	g := newGateFixture(t, Config{Headroom: Headroom{MaxHeld: 2}})
	g.sig.set("a:1", 9, 0.1, t0)
	out := make(chan result, 3)
	g.hold(t, ctxFor("batch", ""), "1", epA, out)
	g.hold(t, ctxFor("batch", ""), "2", epA, out)
	if err := g.c.Hold(ctxFor("batch", ""), epA); !errors.Is(err, ErrShed) {
		t.Fatalf("third: %v, want ErrShed", err)
	}
	// Another endpoint has its own gate.
	g.sig.set("b:1", 0, 0.1, t0)
	if err := g.c.Hold(ctxFor("batch", ""), kvroute.Endpoint{ID: "b:1"}); err != nil {
		t.Fatalf("other endpoint: %v", err)
	}
	if g.gateCount("-1", outcomeShed) != 1 || g.c.Held() != 2 {
		t.Fatal("shed not counted, or held count wrong")
	}
}

func TestGateDeadlineAndCancellation(t *testing.T) {
	g := newGateFixture(t, Config{Objectives: []Objective{{Name: "batch", Priority: -1, QueueTimeout: time.Second}}})
	g.sig.set("a:1", 9, 0.1, t0)
	out := make(chan result, 2)
	g.hold(t, ctxFor("batch", ""), "expires", epA, out)
	ctx, cancel := context.WithCancel(ctxFor("batch", ""))
	g.hold(t, ctx, "cancelled", epA, out)
	cancel()
	if r := take(t, out); r.tag != "cancelled" || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("%s: %v, want the cancelled one with context.Canceled", r.tag, r.err)
	}
	g.clock.WaitForWaiters(2) // the recheck and the deadline
	g.clock.Advance(time.Second)
	if r := take(t, out); !errors.Is(r.err, ErrExpired) {
		t.Fatalf("err %v, want ErrExpired", r.err)
	}
	if g.gateCount("-1", outcomeExpired) != 1 || g.gateCount("-1", outcomeCancelled) != 1 || g.c.Held() != 0 || len(g.c.gates) != 0 {
		t.Fatal("expiry/cancellation not counted, or the gate state kept")
	}
}

func TestGateWaitsWhileAHigherBandIsQueued(t *testing.T) {
	g := newGateFixture(t, Config{})
	g.sig.set("b:1", 0, 0.1, t0) // the engine has headroom
	g.det.set("b:1", true)       // the interactive request's only candidate is saturated
	qout := make(chan result, 1)
	g.admit(t, ctxFor("chat", "t"), "chat", tokensReq(10), []kvroute.Endpoint{{ID: "b:1"}}, qout)
	out := make(chan result, 1)
	g.hold(t, ctxFor("batch", ""), "batch", kvroute.Endpoint{ID: "b:1"}, out)
	if !pending(out) {
		t.Fatal("sheddable request sent while an interactive one is queued")
	}
	g.det.set("b:1", false)
	g.c.Notify("b:1")
	if r := take(t, qout); r.err != nil {
		t.Fatal(r.err)
	}
	if r := take(t, out); r.err != nil {
		t.Fatalf("err %v, want sent once the queue emptied", r.err)
	}
}

func TestGateStaleSignalFallsBackToOwnAccounting(t *testing.T) {
	g := newGateFixture(t, Config{Saturation: Saturation{MaxPrefillBacklog: time.Second, PeakPrefillThroughput: 100}})
	tr := newTracker(t)
	g.c.SetLoad(tr)
	g.sig.set("a:1", 0, 0.1, t0)
	g.sig.mu.Lock()
	g.sig.stale["a:1"] = true // an idle-looking signal, but stale
	g.sig.mu.Unlock()
	h := tr.Dispatch("a:1", 100)  // the own accounting: saturated
	own := tr.Dispatch("a:1", 10) // the held request's pick, committed before Hold
	defer own.Done()
	out := make(chan result, 1)
	g.hold(t, ctxFor("batch", ""), "b", epA, out)
	if !pending(out) {
		t.Fatal("a stale idle signal counted as headroom")
	}
	h.FirstChunk()
	g.c.Notify("a:1")
	if r := take(t, out); r.err != nil {
		t.Fatalf("err %v, want sent", r.err)
	}
	h.Done()
}

// With the engine signal stale, the own accounting that judges headroom
// already holds the load of the requests waiting at the gate (their picks
// committed it), although none of them reached the engine. They do not
// hold themselves up: when nothing else is in flight on the endpoint the
// first of them goes, however large its prompt; the others still wait for
// the own accounting. A sheddable request whose own prompt reached the
// token threshold used to wait for its own load until its deadline.
func TestGateStaleSignalDoesNotHoldARequestForItsOwnLoad(t *testing.T) {
	g := newGateFixture(t, Config{Saturation: Saturation{MaxPrefillBacklog: time.Second, PeakPrefillThroughput: 1000}}) // 1,000 tokens
	tr := newTracker(t)
	g.c.SetLoad(tr) // a:1 has no engine signal: stale
	// Alone on a:1, a request of 1,500 tokens passes at once.
	first := tr.Dispatch("a:1", 1500) // its pick
	if err := g.c.Hold(ctxFor("batch", ""), epA); err != nil {
		t.Fatalf("Hold of the only request in flight on a:1: %v, want nil", err)
	}
	// Two more arrive while the first is in flight: both wait.
	out := make(chan result, 2)
	second := tr.Dispatch("a:1", 1500)
	defer second.Done()
	g.hold(t, ctxFor("batch", ""), "second", epA, out)
	third := tr.Dispatch("a:1", 1500)
	defer third.Done()
	g.hold(t, ctxFor("batch", ""), "third", epA, out)
	if !pending(out) || g.c.Held() != 2 {
		t.Fatalf("held %d, want both requests behind the one in flight held", g.c.Held())
	}
	// The first ends: only held requests are in flight, and the first of
	// them goes; the third then waits behind the second.
	first.Done()
	g.c.Notify("a:1")
	if r := take(t, out); r.tag != "second" || r.err != nil {
		t.Fatalf("got %s (%v), want second sent", r.tag, r.err)
	}
	if !pending(out) || g.c.Held() != 1 {
		t.Fatal("the third request went while the second was in flight and the own accounting saturated")
	}
	second.Done()
	g.c.Notify("a:1")
	if r := take(t, out); r.tag != "third" || r.err != nil {
		t.Fatalf("got %s (%v), want third sent", r.tag, r.err)
	}
	if g.gateCount("-1", "passed") != 1 || g.gateCount("-1", "sent") != 2 {
		t.Fatalf("passed %v, sent %v; want 1, 2", g.gateCount("-1", "passed"), g.gateCount("-1", "sent"))
	}
}

func TestGateDisabledAndCloseLeaveNoGoroutine(t *testing.T) {
	defer leakcheck.Check(t)()
	off := newGateFixture(t, Config{Headroom: Headroom{Disabled: true}})
	off.sig.set("a:1", 99, 1, t0)
	if err := off.c.Hold(ctxFor("batch", ""), epA); err != nil {
		t.Fatalf("disabled gate: %v", err)
	}
	off.c.Close()

	g := newGateFixture(t, Config{})
	g.sig.set("a:1", 99, 1, t0)
	out := make(chan result, 2)
	g.hold(t, ctxFor("batch", ""), "1", epA, out)
	g.hold(t, ctxFor("batch", ""), "2", epA, out)
	g.c.Close()
	for range 2 {
		if r := take(t, out); !errors.Is(r.err, ErrClosed) {
			t.Fatalf("err %v, want ErrClosed", r.err)
		}
	}
	if err := g.c.Hold(ctxFor("batch", ""), epA); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if g.c.Held() != 0 || g.gateCount("-1", outcomeClosed) != 3 {
		t.Fatalf("held %d, closed %v", g.c.Held(), g.gateCount("-1", outcomeClosed))
	}
}

func TestHeadroomConfigValidation(t *testing.T) {
	for _, cfg := range []Config{{Headroom: Headroom{MaxKVCache: 1.5}}, {Headroom: Headroom{MaxHeld: -1}}} {
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%+v: %v, want ErrInvalidConfig", cfg.Headroom, err)
		}
	}
	c := Config{}.withDefaults().Headroom
	if c.MaxWaiting != DefaultHeadroomWaiting || c.MaxKVCache != DefaultHeadroomKVCache || c.MaxHeld != DefaultMaxHeld {
		t.Fatalf("defaults %+v", c)
	}
}

func TestGateForgetsIdleEndpointsOnceTheirCountIsStale(t *testing.T) {
	g := newGateFixture(t, Config{})
	g.sig.set("a:1", 0, 0.1, t0)
	if err := g.c.Hold(ctxFor("batch", ""), epA); err != nil {
		t.Fatal(err)
	}
	g.sig.set("b:1", 9, 0.1, t0) // keeps a request held, and the re-check armed
	out := make(chan result, 1)
	g.hold(t, ctxFor("batch", ""), "b", kvroute.Endpoint{ID: "b:1"}, out)
	g.clock.WaitForWaiters(2)
	g.clock.Advance(DefaultRecheck)
	g.c.mu.Lock()
	_, kept := g.c.gates["a:1"]
	g.c.mu.Unlock()
	if !kept {
		t.Fatal("a:1's sent count dropped before a newer scrape")
	}
	g.sig.set("a:1", 0, 0.1, t0.Add(time.Millisecond)) // a newer scrape
	g.clock.WaitForWaiters(2)
	g.clock.Advance(DefaultRecheck)
	waitFor(t, func() bool {
		g.c.mu.Lock()
		defer g.c.mu.Unlock()
		_, kept := g.c.gates["a:1"]
		return !kept && len(g.c.gates) == 1
	})
}

// The gate state of endpoints that are gone is pruned as the gate map
// grows, not only by the re-check, which runs only while something is
// queued, claimed or held: with pods churning and sheddable requests
// passing the gate at once, the map stays within twice the endpoints in use
// (and gatePruneMin), and what is in use (a held request, a sent count
// still counting against a fresh scrape) is kept.
func TestGateStateOfGoneEndpointsStaysBoundedWithoutTheRecheck(t *testing.T) {
	g := newGateFixture(t, Config{})
	live := kvroute.Endpoint{ID: "live:1"}
	g.sig.set(live.ID, 0, 0.1, t0) // room for one: its sent count matters until the next scrape
	if err := g.c.Hold(ctxFor("batch", ""), live); err != nil {
		t.Fatal(err)
	}
	busy := kvroute.Endpoint{ID: "busy:1"}
	g.sig.set(busy.ID, 9, 0.1, t0)
	out := make(chan result, 1)
	g.hold(t, ctxFor("batch", ""), "held", busy, out)
	for i := range 10 * gatePruneMin {
		ep := kvroute.Endpoint{ID: fmt.Sprintf("pod-%d:8000", i)}
		g.sig.set(ep.ID, 0, 0.1, t0) // an idle engine: the request passes at once
		if err := g.c.Hold(ctxFor("batch", ""), ep); err != nil {
			t.Fatal(err)
		}
		g.sig.mu.Lock()
		g.sig.stale[ep.ID] = true // the pod is gone: no fresh signal any more
		g.sig.mu.Unlock()
		g.c.mu.Lock()
		n := len(g.c.gates)
		g.c.mu.Unlock()
		if n > gatePruneMin {
			t.Fatalf("%d gate entries after %d endpoints came and went, want at most %d", n, i+1, gatePruneMin)
		}
	}
	g.c.mu.Lock()
	lg, busyg := g.c.gates[live.ID], g.c.gates[busy.ID]
	g.c.mu.Unlock()
	if lg == nil || lg.sent != 1 || busyg == nil || len(busyg.held) != 1 {
		t.Fatal("pruning dropped the state of an endpoint in use")
	}
	if !pending(out) {
		t.Fatal("the held request left its gate")
	}
}

// A request naming an unknown objective is counted once in
// kvroute_admission_unknown_objectives_total, although the host resolves
// its objective twice, in Admit and again in Hold: every request through
// the gateway or the ext_proc picker used to count twice.
func TestUnknownObjectiveCountedOncePerRequest(t *testing.T) {
	g := newGateFixture(t, Config{DefaultPriority: -1})
	g.sig.set("a:1", 0, 0.1, t0)
	ctx := ctxFor("no-such-objective", "")
	if err := g.c.Admit(ctx, tokensReq(10), oneEP); err != nil {
		t.Fatal(err)
	}
	if err := g.c.Hold(ctx, epA); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(g.c.met.unknown); n != 1 {
		t.Fatalf("unknown objectives counted %v times for one request, want 1", n)
	}
	if g.gateCount("-1", "passed") != 1 {
		t.Fatal("the unknown objective's request did not take the default (sheddable) priority at the gate")
	}
}

// A sheddable request held at an endpoint's gate holds its committed load
// in kvroute's own accounting, and an interactive request queued in Admit
// for that endpoint keeps every held one back. When the held requests' own
// load is what saturates the endpoint, neither could ever go: the
// interactive request waited for them to leave, and they for it, until
// one of their deadlines. Once nothing but held requests is in flight on
// the endpoint and its engine has headroom, the first held one goes
// (releasing it takes nothing the own accounting has not already counted),
// its prefill ends, and the interactive request follows.
func TestGateDoesNotDeadlockAHigherBandWaitingOnTheHeldLoad(t *testing.T) {
	g := newGateFixture(t, Config{Saturation: Saturation{MaxPrefillBacklog: time.Second, PeakPrefillThroughput: 1000}}) // 1,000 tokens
	tr := newTracker(t)
	g.c.SetLoad(tr)
	g.sig.set("a:1", 1, 0.1, t0)     // one request waits in the engine: no headroom
	held := tr.Dispatch("a:1", 1500) // the sheddable request's pick
	defer held.Done()
	out := make(chan result, 1)
	g.hold(t, ctxFor("batch", ""), "batch", epA, out)
	if !pending(out) {
		t.Fatal("sent without headroom")
	}
	// The interactive request's only candidate is saturated by the held
	// request's load alone.
	qout := make(chan result, 1)
	g.admit(t, ctxFor("chat", "t"), "chat", tokensReq(10), oneEP, qout)
	if !pending(qout) {
		t.Fatal("admitted onto a saturated endpoint")
	}
	// The engine's queue drains: headroom.
	g.sig.set("a:1", 0, 0.1, t0.Add(time.Millisecond))
	g.c.Notify("a:1")
	if r := take(t, out); r.err != nil {
		t.Fatalf("held request: %v, want sent", r.err)
	}
	held.FirstChunk() // its prefill is done: a:1 is no longer saturated
	g.c.Notify("a:1")
	if r := take(t, qout); r.err != nil {
		t.Fatalf("interactive request: %v, want dispatched", r.err)
	}
}

// A request of a higher band queued in Admit keeps back only the sheddable
// requests held at the gates of its own candidates: releasing one to
// another endpoint takes no headroom it waits for. An interactive request
// queued for one model's saturated endpoint kept every sheddable request
// of every other model at its gate, engines idle, until its deadline or
// shed.
func TestGateIsNotHeldByAHigherBandQueuedForOtherEndpoints(t *testing.T) {
	g := newGateFixture(t, Config{})
	g.det.set("b:1", true) // the interactive request's only candidate
	qout := make(chan result, 1)
	g.admit(t, ctxFor("chat", "t"), "chat", tokensReq(10), []kvroute.Endpoint{{ID: "b:1"}}, qout)
	g.sig.set("a:1", 0, 0.1, t0) // an idle engine
	aout := make(chan result, 1)
	g.hold(t, ctxFor("batch", ""), "batch-a", epA, aout)
	if pending(aout) {
		t.Fatal("a sheddable request for the idle a:1 held while an interactive one waits for b:1")
	}
	g.sig.set("b:1", 0, 0.1, t0) // b:1's engine has headroom, but the chat request waits for b:1
	out := make(chan result, 1)
	g.hold(t, ctxFor("batch", ""), "batch", kvroute.Endpoint{ID: "b:1"}, out)
	if !pending(out) {
		t.Fatal("a sheddable request sent to the endpoint an interactive one is queued for")
	}
	g.det.set("b:1", false)
	g.c.Notify("b:1")
	if r := take(t, qout); r.err != nil {
		t.Fatal(r.err)
	}
	if r := take(t, out); r.err != nil {
		t.Fatalf("err %v, want sent once the queue emptied", r.err)
	}
}

// A sheddable request's whole wait, in the admission queue and then at the
// dispatch gate, is bounded by one queue timeout counted from its arrival
// to Admit (the request's record, Track): the gate used to count the
// objective's timeout again from Hold, so the request could wait twice it.
func TestGateBoundsTheWholeWaitByOneQueueTimeout(t *testing.T) {
	g := newGateFixture(t, Config{Settle: time.Hour, Objectives: []Objective{
		{Name: "chat", Priority: 1}, {Name: "batch", Priority: -1, QueueTimeout: time.Second}}})
	a, b := kvroute.Endpoint{ID: "a:1"}, kvroute.Endpoint{ID: "b:1"}
	g.det.set("a:1", true)
	g.det.set("b:1", true)
	out := make(chan result, 2)
	g.admit(t, ctxFor("chat", ""), "chat", tokensReq(10), []kvroute.Endpoint{b}, out)
	g.det.set("b:1", false)
	g.c.Notify("") // chat leaves, and claims b:1 until the hour's Settle
	if r := take(t, out); r.tag != "chat" || r.err != nil {
		t.Fatalf("%s: %v, want chat released", r.tag, r.err)
	}
	ctx := Track(ctxFor("batch", ""))
	g.admit(t, ctx, "batch", tokensReq(10), []kvroute.Endpoint{a, b}, out) // a:1 saturated, b:1 claimed: it queues
	if g.c.Queued() != 1 {
		t.Fatal("the sheddable request did not queue")
	}
	g.clock.WaitForWaiters(2) // the re-check and the queued request's deadline
	g.clock.Advance(900 * time.Millisecond)
	g.c.Notify("b:1") // its claim lapses: batch leaves for b:1 after 900 ms in the queue
	if r := take(t, out); r.tag != "batch" || r.err != nil {
		t.Fatalf("%s: %v, want batch released", r.tag, r.err)
	}
	g.sig.set("b:1", 9, 0.1, g.clock.Now()) // b:1's engine has no headroom
	g.hold(t, ctx, "held", b, out)
	if !pending(out) {
		t.Fatal("sent to an engine without headroom")
	}
	g.clock.WaitForWaiters(2) // the re-check and the held request's deadline
	g.clock.Advance(100 * time.Millisecond)
	if r := take(t, out); r.tag != "held" || !errors.Is(r.err, ErrExpired) {
		t.Fatalf("%s: %v, want ErrExpired one second after its arrival to Admit", r.tag, r.err)
	}
}

// A held request released while its caller cancels is not sent, and the
// endpoint's sent count (which stands in for the engine's waiting requests
// until the next scrape) gives its place back at once: it used to keep it
// until the next scrape, holding the next sheddable request for nothing.
func TestGateReleasedRequestWhoseCallerLeftIsNotCountedSent(t *testing.T) {
	g := newGateFixture(t, Config{}) // MaxWaiting 1
	g.sig.set("a:1", 9, 0.1, t0)
	ctx, cancel := context.WithCancel(ctxFor("batch", ""))
	out := make(chan result, 2)
	g.hold(t, ctx, "cancelled", epA, out)
	// The release and the cancellation meet: the caller has seen its
	// context end and waits for mu to leave the gate when the release,
	// under mu, finds headroom and sends it.
	g.c.mu.Lock()
	cancel()
	waitFor(t, func() bool { return goroutineIn("admission.(*Controller).unhold") })
	g.sig.set("a:1", 0, 0.1, t0.Add(time.Millisecond))
	g.c.serveGatesLocked()
	g.c.mu.Unlock()
	if r := take(t, out); r.tag != "cancelled" || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("%s: %v, want context.Canceled", r.tag, r.err)
	}
	g.hold(t, ctxFor("batch", ""), "next", epA, out)
	if pending(out) {
		t.Fatal("the next sheddable request is held by the count of one never sent")
	}
	if g.gateCount("-1", "sent") != 0 || g.gateCount("-1", outcomeCancelled) != 1 || g.gateCount("-1", "passed") != 1 {
		t.Fatalf("sent %v cancelled %v passed %v, want 0, 1, 1", g.gateCount("-1", "sent"),
			g.gateCount("-1", outcomeCancelled), g.gateCount("-1", "passed"))
	}
}

// goroutineIn reports whether some goroutine's stack holds fn.
func goroutineIn(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

// A host's EngineSignals that leaves Signal.Scraped zero gives the gate no
// scrape time to count the requests it sent from: the gate times the count
// itself over a re-check interval. Within one, no more than MaxWaiting go
// out however many are held (the signal cannot show them yet), and the
// count is kept for them; once it passed, the re-check restarts the count
// and sends the next, instead of holding every sheddable request for good
// once MaxWaiting were sent; and the engine's own queue still holds.
func TestGateWithoutAScrapeTimeCountsItsSendsPerRecheck(t *testing.T) {
	g := newGateFixture(t, Config{Headroom: Headroom{MaxWaiting: 2}})
	g.sig.set("a:1", 0, 0.1, time.Time{}) // room, no scrape time
	for range 2 {
		if err := g.c.Hold(ctxFor("batch", ""), epA); err != nil {
			t.Fatal(err)
		}
	}
	out := make(chan result, 4)
	for i := range 3 {
		g.hold(t, ctxFor("batch", ""), fmt.Sprint(i), epA, out)
		if !pending(out) {
			t.Fatalf("held request %d went out within the interval that already sent MaxWaiting", i)
		}
	}
	g.c.mu.Lock()
	g.c.pruneGatesLocked()
	sent := g.c.gates["a:1"].sent
	g.c.mu.Unlock()
	if sent != 2 {
		t.Fatalf("sent count %d after a prune, want 2", sent)
	}

	// The re-check, one interval on, restarts the count: two more go.
	g.clock.WaitForWaiters(4) // the re-check and the held requests' deadlines
	g.clock.Advance(DefaultRecheck)
	for range 2 {
		if r := take(t, out); r.err != nil {
			t.Fatalf("%s: %v, want sent", r.tag, r.err)
		}
	}
	if !pending(out) || g.c.Held() != 1 {
		t.Fatalf("held %d, want the third still held in the new interval", g.c.Held())
	}
	g.clock.WaitForWaiters(2)
	g.clock.Advance(DefaultRecheck)
	if r := take(t, out); r.err != nil {
		t.Fatalf("%s: %v, want sent", r.tag, r.err)
	}

	// Nothing held and the interval over: the count no longer matters.
	g.clock.Advance(DefaultRecheck)
	g.c.mu.Lock()
	g.c.pruneGatesLocked()
	_, kept := g.c.gates["a:1"]
	g.c.mu.Unlock()
	if kept {
		t.Fatal("a:1's gate state kept after its interval")
	}
	g.sig.set("a:1", 2, 0.1, time.Time{}) // the engine's own queue holds
	g.hold(t, ctxFor("batch", ""), "waiting", epA, out)
	if !pending(out) {
		t.Fatal("a request went out to an engine with waiting requests")
	}
}
