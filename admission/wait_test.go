package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

func TestQueueDeadlineExpiresOnTheClock(t *testing.T) {
	f := newFixture(t, Config{Objectives: []Objective{{Name: "chat", Priority: 1, QueueTimeout: 2 * time.Second}}})
	f.det.set("a:1", true)
	out := make(chan result, 1)
	f.admit(t, ctxFor("chat", ""), "chat", tokensReq(10), oneEP, out)
	f.clock.WaitForWaiters(2) // the re-check and the request's deadline
	f.clock.Advance(1999 * time.Millisecond)
	select {
	case r := <-out:
		t.Fatalf("left before its deadline: %v", r.err)
	default:
	}
	f.clock.Advance(time.Millisecond)
	if r := take(t, out); !errors.Is(r.err, ErrExpired) {
		t.Fatalf("err %v, want ErrExpired", r.err)
	}
	if f.count("1", outcomeExpired) != 1 || f.c.Queued() != 0 {
		t.Fatal("expiry not counted, or still queued")
	}
	if got := testutil.ToFloat64(f.c.met.size.WithLabelValues("1")); got != 0 {
		t.Fatalf("queue size gauge %v, want 0", got)
	}
	if n := testutil.CollectAndCount(f.c.met.queueTime, "llm_d_epp_flow_control_request_queue_duration_seconds"); n == 0 {
		t.Fatal("queue time not observed")
	}
}

func TestRequestDeadlineReplacesTheObjectives(t *testing.T) {
	f := newFixture(t, Config{QueueTimeout: time.Hour})
	f.det.set("a:1", true)
	out := make(chan result, 1)
	f.admit(t, WithDeadline(context.Background(), t0.Add(time.Second)), "r", tokensReq(10), oneEP, out)
	f.clock.WaitForWaiters(2)
	f.clock.Advance(time.Second)
	if r := take(t, out); !errors.Is(r.err, ErrExpired) {
		t.Fatalf("err %v, want ErrExpired", r.err)
	}
	// A deadline already past expires without queuing.
	err := f.c.Admit(WithDeadline(context.Background(), t0), tokensReq(10), oneEP)
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("past deadline: %v, want ErrExpired", err)
	}
}

func TestCancelledCallerLeavesTheQueueAtOnce(t *testing.T) {
	f := newFixture(t, Config{})
	f.det.set("a:1", true)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan result, 1)
	f.admit(t, ctx, "r", tokensReq(10), oneEP, out)
	cancel()
	if r := take(t, out); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", r.err)
	}
	if f.count("0", outcomeCancelled) != 1 || f.c.Queued() != 0 {
		t.Fatal("cancellation not counted, or still queued")
	}
}

func TestRecheckNoticesReleasesNobodyNotified(t *testing.T) {
	f := newFixture(t, Config{Recheck: 50 * time.Millisecond})
	f.det.set("a:1", true)
	out := make(chan result, 1)
	f.admit(t, context.Background(), "r", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.clock.WaitForWaiters(2)
	f.clock.Advance(50 * time.Millisecond)
	if r := take(t, out); r.err != nil {
		t.Fatalf("err %v, want dispatched", r.err)
	}
}

func TestUnknownObjectiveGetsTheDefaultAndIsCounted(t *testing.T) {
	f := newFixture(t, Config{DefaultPriority: 3, Objectives: []Objective{{Name: "chat", Priority: 1}}})
	if err := f.c.Admit(ctxFor("nope", ""), tokensReq(10), oneEP); err != nil {
		t.Fatal(err)
	}
	if testutil.ToFloat64(f.c.met.unknown) != 1 || f.count("3", outcomeAdmitted) != 1 {
		t.Fatal("unknown objective not counted under the default priority")
	}
}

func TestCloseRefusesQueuedRequestsAndLeavesNoGoroutine(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newFixture(t, Config{})
	f.det.set("a:1", true)
	out := make(chan result, 3)
	for range 3 {
		f.admit(t, context.Background(), "r", tokensReq(10), oneEP, out)
	}
	f.c.Close()
	for range 3 {
		if r := take(t, out); !errors.Is(r.err, ErrClosed) {
			t.Fatalf("err %v, want ErrClosed", r.err)
		}
	}
	if err := f.c.Admit(context.Background(), tokensReq(10), oneEP); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	if f.count("0", outcomeClosed) != 4 {
		t.Fatalf("closed %v, want 4", f.count("0", outcomeClosed))
	}
}

// Admit's fast path (empty queue, no claims, a free candidate) refuses
// too once Close has run: a request arriving after Close is not admitted.
func TestAdmitAfterCloseIsRefusedEvenWithAFreeCandidate(t *testing.T) {
	f := newFixture(t, Config{})
	f.c.Close()
	err := f.c.Admit(context.Background(), tokensReq(10), oneEP) // a:1 is not saturated
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Admit after Close = %v, want ErrClosed", err)
	}
	if f.count("0", outcomeClosed) != 1 || f.count("0", outcomeAdmitted) != 0 {
		t.Fatalf("closed %v, admitted %v; want 1, 0", f.count("0", outcomeClosed), f.count("0", outcomeAdmitted))
	}
}

// A request released from the queue whose caller had already gone does not
// leave its endpoint claimed: Admit returns the context's error, the pick
// never runs and nothing would move the endpoint's accounting, so the claim
// held the endpoint from the rest of the queue until Settle passed. The
// caller's select sees its release and its cancellation at once and takes
// either; the test repeats until it takes the cancellation.
func TestCancelledCallerReleasedFromTheQueueLeavesNoClaim(t *testing.T) {
	for range 200 {
		f := newFixture(t, Config{Settle: time.Hour})
		f.det.set("b:1", true)
		out := make(chan result, 1)
		f.admit(t, ctxFor("", "other"), "waits", tokensReq(10), []kvroute.Endpoint{{ID: "b:1"}}, out)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		// The queue is not empty, so the request queues and is released
		// to a:1, free, in the same call.
		err := f.c.Admit(ctx, tokensReq(10), oneEP)
		if err == nil {
			f.c.Close()
			continue // it took its release: the claim is its pick's
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		f.c.mu.Lock()
		_, claimed := f.c.claims["a:1"]
		f.c.mu.Unlock()
		if claimed || f.c.nclaims.Load() != 0 {
			t.Fatal("a:1 stays claimed by a request whose caller left")
		}
		return
	}
	t.Fatal("the cancellation never won over the release")
}

// A released request's claim, taken on the free candidate the release
// found, goes as soon as the pick is known (Hold, with the request's
// record): the pick may choose another candidate (a cache-warm one), and the
// claim used to keep the rest of the queue off the first until Settle,
// although no request was on its way there.
func TestClaimOfAReleasedRequestGoesOnceItsPickIsKnown(t *testing.T) {
	f := newFixture(t, Config{Settle: time.Hour, Objectives: []Objective{{Name: "chat", Priority: 1}}})
	eps := []kvroute.Endpoint{{ID: "a:1"}, {ID: "b:1"}}
	f.det.set("a:1", true)
	f.det.set("b:1", true)
	out := make(chan result, 2)
	ctx := Track(ctxFor("chat", "t1"))
	f.admit(t, ctx, "first", tokensReq(10), eps, out)
	f.admit(t, ctxFor("chat", "t2"), "second", tokensReq(10), eps, out)
	f.det.set("a:1", false)
	f.c.Notify("") // first leaves, claiming a:1; second waits for it
	if r := take(t, out); r.tag != "first" || r.err != nil {
		t.Fatalf("%s: %v, want first released", r.tag, r.err)
	}
	if f.c.Queued() != 1 {
		t.Fatal("one release let two requests through")
	}
	// first's pick chooses b:1 (its prefix is cached there).
	if err := f.c.Hold(ctx, eps[1]); err != nil {
		t.Fatal(err)
	}
	if f.c.Queued() != 0 {
		t.Fatal("a:1 stays claimed by a request picked onto b:1")
	}
	if r := take(t, out); r.tag != "second" || r.err != nil {
		t.Fatalf("%s: %v, want second released to a:1", r.tag, r.err)
	}
}

// failingProfile is a Profile whose pick always fails (after the admission).
type failingProfile struct{}

var errPickFailed = errors.New("pick failed")

func (failingProfile) Pick(context.Context, *kvroute.Request, []kvroute.Endpoint, kvroute.Picker) (*kvroute.Decision, error) {
	return nil, errPickFailed
}

// A released request whose pick fails does not keep its claim: the Router
// tells the Controller (Abandon), the claim Admit's release took is
// dropped at once and the next queued request goes to the endpoint. Before,
// no Hold followed, and the claim held the endpoint from the queue until
// Settle (here an hour).
func TestClaimOfAReleasedRequestGoesWhenItsPickFails(t *testing.T) {
	f := newFixture(t, Config{Settle: time.Hour, Objectives: []Objective{{Name: "chat", Priority: 1}}})
	cfg := kvroute.DefaultConfig()
	cfg.Model = "m"
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{Admission: f.c, Profile: failingProfile{}})
	if err != nil {
		t.Fatal(err)
	}
	defer router.Close()
	f.det.set("a:1", true)
	out := make(chan result, 2)
	ctx := Track(ctxFor("chat", "t1"))
	before := f.enqueued()
	go func() {
		_, err := router.Pick(ctx, tokensReq(10), oneEP)
		out <- result{"first", err}
	}()
	waitFor(t, func() bool { return f.enqueued() > before })
	f.admit(t, ctxFor("chat", "t2"), "second", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.c.Notify("") // first leaves, claiming a:1, and its pick fails
	// Second may be released before first's Pick has returned.
	got := map[string]error{}
	for range 2 {
		r := take(t, out)
		got[r.tag] = r.err
	}
	if err, ok := got["first"]; !ok || !errors.Is(err, errPickFailed) {
		t.Fatalf("first: %v, want its pick failed", err)
	}
	if err, ok := got["second"]; !ok || err != nil {
		t.Fatalf("second: %v (returned %v), want released to a:1 once first's pick failed", err, ok)
	}
}

// A released request that ends without a Hold (its host neither held nor
// abandoned it, and its context ended) does not keep its claim either.
func TestClaimOfAReleasedRequestGoesWhenItEndsWithoutHold(t *testing.T) {
	f := newFixture(t, Config{Settle: time.Hour, Objectives: []Objective{{Name: "chat", Priority: 1}}})
	f.det.set("a:1", true)
	out := make(chan result, 2)
	ctx, cancel := context.WithCancel(Track(ctxFor("chat", "t1")))
	defer cancel()
	f.admit(t, ctx, "first", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("chat", "t2"), "second", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.c.Notify("")
	if r := take(t, out); r.tag != "first" || r.err != nil {
		t.Fatalf("%s: %v, want first released", r.tag, r.err)
	}
	if f.c.Queued() != 1 {
		t.Fatal("one release let two requests through")
	}
	cancel() // the request ends; no Hold came
	if r := take(t, out); r.tag != "second" || r.err != nil {
		t.Fatalf("%s: %v, want second released to a:1 once first ended", r.tag, r.err)
	}
}
