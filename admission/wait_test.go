package admission

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
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

// newRouter is a Router admitting through f's Controller, rendering
// nothing (the requests carry their prompts).
func newRouter(t *testing.T, f *fixture, profile kvroute.Profile) *kvroute.Router {
	t.Helper()
	cfg := kvroute.DefaultConfig()
	cfg.Model = "m"
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{Admission: f.c, Profile: profile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(router.Close)
	return router
}

// noOutcome fails when out yields an outcome within a short while.
func noOutcome(t *testing.T, out <-chan result, why string) {
	t.Helper()
	select {
	case r := <-out:
		t.Fatalf("%s: %s returned %v", why, r.tag, r.err)
	case <-time.After(20 * time.Millisecond):
	}
}

// takeWithin is take with a short deadline, for outcomes that are due at
// once (a claim that lapsed only at Settle, an hour here, would stall it).
func takeWithin(t *testing.T, out <-chan result, why string) result {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no outcome within 5s", why)
		return result{}
	}
}

// A host running the stages itself (Router.Match) that releases the
// Selection without committing it (the client went away, it decided not to
// send) gives back the claim the request's release from the queue took:
// Release tells the Controller (Abandon) as a failed Match does. Before,
// Release did not, and with a context that outlives the request (here one
// that never ends) the claim kept the endpoint from the queue until Settle.
// A later Hold, Abandon or end of that request's context does not drop the
// claim a later request took.
func TestClaimOfAReleasedRequestGoesWhenItsSelectionIsReleasedUncommitted(t *testing.T) {
	f := newFixture(t, Config{Settle: time.Hour, Objectives: []Objective{{Name: "chat", Priority: 1}}})
	router := newRouter(t, f, nil)
	f.det.set("a:1", true)
	out := make(chan result, 3)
	ctx, cancel := context.WithCancel(Track(ctxFor("chat", "t1")))
	defer cancel()
	sel := make(chan *kvroute.Selection, 1)
	before := f.enqueued()
	go func() {
		s, err := router.Match(ctx, tokensReq(10), oneEP)
		sel <- s
		out <- result{"first", err}
	}()
	waitFor(t, func() bool { return f.enqueued() > before })
	f.admit(t, ctxFor("chat", "t2"), "second", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("chat", "t3"), "third", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.c.Notify("") // first leaves, claiming a:1
	if r := takeWithin(t, out, "first"); r.tag != "first" || r.err != nil {
		t.Fatalf("%s: %v, want first matched", r.tag, r.err)
	}
	noOutcome(t, out, "a:1 is claimed by first")
	(<-sel).Release() // not committed: first is not sent
	if r := takeWithin(t, out, "second, once first's Selection is released"); r.tag != "second" || r.err != nil {
		t.Fatalf("%s: %v, want second released to a:1", r.tag, r.err)
	}
	// second's claim is its own: first's Hold, Abandon or end does not drop it.
	if err := f.c.Hold(ctx, oneEP[0]); err != nil {
		t.Fatal(err)
	}
	f.c.Abandon(ctx)
	cancel()
	noOutcome(t, out, "a:1 is claimed by second")
	if f.c.Queued() != 1 || f.c.nclaims.Load() != 1 {
		t.Fatalf("queued %d, claims %d; want third queued behind second's claim", f.c.Queued(), f.c.nclaims.Load())
	}
}

// A committed Selection's release leaves the claim to Hold, as Pick does:
// Release tells the Controller only of a request that is not routed.
func TestSelectionReleasedAfterCommitLeavesTheClaimToHold(t *testing.T) {
	f := newFixture(t, Config{Settle: time.Hour, Objectives: []Objective{{Name: "chat", Priority: 1}}})
	router := newRouter(t, f, nil)
	f.det.set("a:1", true)
	out := make(chan result, 2)
	ctx := Track(ctxFor("chat", "t1"))
	sel := make(chan *kvroute.Selection, 1)
	before := f.enqueued()
	go func() {
		s, err := router.Match(ctx, tokensReq(10), oneEP)
		sel <- s
		out <- result{"first", err}
	}()
	waitFor(t, func() bool { return f.enqueued() > before })
	f.admit(t, ctxFor("chat", "t2"), "second", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.c.Notify("")
	if r := takeWithin(t, out, "first"); r.tag != "first" || r.err != nil {
		t.Fatalf("%s: %v, want first matched", r.tag, r.err)
	}
	s := <-sel
	d, err := s.Commit(0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Done(kvroute.DoneInfo{})
	s.Release()
	noOutcome(t, out, "a:1 stays claimed until first's Hold")
	if err := f.c.Hold(ctx, d.Endpoint); err != nil {
		t.Fatal(err)
	}
	if r := takeWithin(t, out, "second, once first is held"); r.tag != "second" || r.err != nil {
		t.Fatalf("%s: %v, want second released to a:1", r.tag, r.err)
	}
}

// A released request's claim without the request's record (a host that
// does not call Track or FromHeader: Hold and Abandon cannot tell which
// claim is its) goes when the request's context ends. Before, nothing but
// the endpoint's accounting or Settle let it go: a pick onto another
// candidate, or one that failed, kept the endpoint from the queue until
// Settle.
func TestClaimOfARequestReleasedWithoutRecordGoesWhenItEnds(t *testing.T) {
	f := newFixture(t, Config{Settle: time.Hour, Objectives: []Objective{{Name: "chat", Priority: 1}}})
	f.det.set("a:1", true)
	out := make(chan result, 2)
	ctx, cancel := context.WithCancel(ctxFor("chat", "t1")) // no Track
	defer cancel()
	f.admit(t, ctx, "first", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("chat", "t2"), "second", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.c.Notify("")
	if r := takeWithin(t, out, "first"); r.tag != "first" || r.err != nil {
		t.Fatalf("%s: %v, want first released", r.tag, r.err)
	}
	noOutcome(t, out, "a:1 is claimed by first")
	cancel() // the request ends
	if r := takeWithin(t, out, "second, once first ended"); r.tag != "second" || r.err != nil {
		t.Fatalf("%s: %v, want second released to a:1 once first ended", r.tag, r.err)
	}
}

// A request admitted again with the same context (a host that picks it
// again) gives back the claim of its earlier release: that pick is over,
// and the record no longer names the claim, so Hold could not drop it.
// Before, the record forgot it and it stayed until Settle.
func TestClaimOfAnEarlierReleaseGoesWhenTheRequestIsAdmittedAgain(t *testing.T) {
	f := newFixture(t, Config{Settle: time.Hour, Objectives: []Objective{{Name: "chat", Priority: 1}}})
	eps := []kvroute.Endpoint{{ID: "a:1"}, {ID: "b:1"}}
	f.det.set("a:1", true)
	f.det.set("b:1", true)
	out := make(chan result, 3)
	ctx := Track(ctxFor("chat", "t1"))
	f.admit(t, ctx, "first", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("chat", "t2"), "second", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.c.Notify("")
	if r := takeWithin(t, out, "first"); r.tag != "first" || r.err != nil {
		t.Fatalf("%s: %v, want first released", r.tag, r.err)
	}
	noOutcome(t, out, "a:1 is claimed by first")
	// Picked again, among candidates of which only b:1 will come free.
	f.admit(t, ctx, "first again", tokensReq(10), eps[1:], out)
	if r := takeWithin(t, out, "second, once first is admitted again"); r.tag != "second" || r.err != nil {
		t.Fatalf("%s: %v, want second released to a:1", r.tag, r.err)
	}
}

// Claims are given back exactly once whatever gives them back, racing:
// Hold, Abandon, a Selection released uncommitted and the end of the
// request's context, all at once for each released request. The own
// accounting has no load tracker and Settle is an hour, so only they let a
// claim go: a claim never given back stalls the queue, and one given back
// twice (dropping the next request's claim) lets two requests through at
// once. Run it with -race -count=20.
func TestClaimsAreGivenBackOnceUnderRacingReleases(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newFixture(t, Config{Settle: time.Hour, MaxQueuedRequests: 64, Objectives: []Objective{{Name: "chat", Priority: 1}}})
	cfg := kvroute.DefaultConfig()
	cfg.Model = "m"
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{Admission: f.c})
	if err != nil {
		t.Fatal(err)
	}
	defer router.Close()
	defer f.c.Close()
	f.det.set("a:1", true)
	const n = 24
	var (
		active atomic.Int32
		wg     sync.WaitGroup
		errs   = make(chan error, n)
	)
	for i := range n {
		ctx, cancel := context.WithCancel(ctxFor("chat", "t"+strconv.Itoa(i%3)))
		if i%4 != 3 {
			ctx = Track(ctx) // the last kind has no record: only its context's end gives its claim back
		}
		before := f.enqueued()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			s, err := router.Match(ctx, tokensReq(10), oneEP)
			if err != nil {
				errs <- err
				return
			}
			if a := active.Add(1); a != 1 {
				errs <- fmt.Errorf("%d requests released to a:1 at once", a)
			}
			for range 50 {
				runtime.Gosched() // let a wrongly released request show
			}
			active.Add(-1)
			var d *kvroute.Decision
			if i%2 == 0 {
				if d, err = s.Commit(0); err != nil {
					errs <- err
				}
			}
			var race sync.WaitGroup
			race.Go(s.Release)
			race.Go(func() { f.c.Abandon(ctx) })
			race.Go(func() {
				if err := f.c.Hold(ctx, oneEP[0]); err != nil {
					errs <- err
				}
			})
			race.Go(cancel)
			race.Wait()
			if d != nil {
				d.Done(kvroute.DoneInfo{})
			}
		}()
		waitFor(t, func() bool { return f.enqueued() > before })
	}
	f.det.set("a:1", false)
	f.c.Notify("")
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("stalled with %d queued, %d claims: a claim was never given back", f.c.Queued(), f.c.nclaims.Load())
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The last claim may be the context's to give back, on its own goroutine.
	waitFor(t, func() bool { return f.c.nclaims.Load() == 0 })
	if f.c.Queued() != 0 {
		t.Fatalf("queued %d, want none", f.c.Queued())
	}
}

// Close drops the claims of released requests and stops the watches of
// their contexts: a closed Controller keeps no claim, and no goroutine is
// left once the requests' contexts end.
func TestCloseDropsClaimsAndLeavesNoGoroutine(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newFixture(t, Config{Settle: time.Hour})
	eps := []kvroute.Endpoint{{ID: "a:1"}, {ID: "b:1"}}
	f.det.set("a:1", true)
	f.det.set("b:1", true)
	out := make(chan result, 3)
	ctxA, cancelA := context.WithCancel(Track(context.Background()))
	defer cancelA()
	ctxB, cancelB := context.WithCancel(context.Background()) // no record
	defer cancelB()
	f.admit(t, ctxA, "a", tokensReq(10), eps[:1], out)
	f.admit(t, ctxB, "b", tokensReq(10), eps[1:], out)
	f.admit(t, context.Background(), "waits", tokensReq(10), eps, out)
	f.det.set("a:1", false)
	f.det.set("b:1", false)
	f.c.Notify("")
	for range 2 {
		if r := takeWithin(t, out, "a and b"); r.err != nil {
			t.Fatalf("%s: %v", r.tag, r.err)
		}
	}
	if f.c.nclaims.Load() != 2 {
		t.Fatalf("claims %d, want a:1's and b:1's", f.c.nclaims.Load())
	}
	f.c.Close()
	if r := takeWithin(t, out, "waits"); !errors.Is(r.err, ErrClosed) {
		t.Fatalf("%s: %v, want ErrClosed", r.tag, r.err)
	}
	if f.c.nclaims.Load() != 0 || len(f.c.claims) != 0 {
		t.Fatalf("claims %d after Close, want none", f.c.nclaims.Load())
	}
	cancelA()
	cancelB()
}

// A claim that lapsed at Settle is not given back again by the request's
// later release of its Selection: the claim the next request took stays.
func TestSelectionReleasedAfterSettleLeavesTheNextClaim(t *testing.T) {
	f := newFixture(t, Config{Settle: time.Second, Recheck: time.Second, Objectives: []Objective{{Name: "chat", Priority: 1}}})
	router := newRouter(t, f, nil)
	f.det.set("a:1", true)
	out := make(chan result, 3)
	ctx := Track(ctxFor("chat", "t1"))
	sel := make(chan *kvroute.Selection, 1)
	before := f.enqueued()
	go func() {
		s, err := router.Match(ctx, tokensReq(10), oneEP)
		sel <- s
		out <- result{"first", err}
	}()
	waitFor(t, func() bool { return f.enqueued() > before })
	f.admit(t, ctxFor("chat", "t2"), "second", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("chat", "t3"), "third", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.c.Notify("")
	if r := takeWithin(t, out, "first"); r.tag != "first" || r.err != nil {
		t.Fatalf("%s: %v, want first matched", r.tag, r.err)
	}
	f.clock.WaitForWaiters(3)    // the re-check and the two queued deadlines
	f.clock.Advance(time.Second) // first's claim lapses; second takes a:1
	if r := takeWithin(t, out, "second, at Settle"); r.tag != "second" || r.err != nil {
		t.Fatalf("%s: %v, want second released to a:1", r.tag, r.err)
	}
	(<-sel).Release()
	noOutcome(t, out, "a:1 is claimed by second")
	if f.c.Queued() != 1 || f.c.nclaims.Load() != 1 {
		t.Fatalf("queued %d, claims %d; want third queued behind second's claim", f.c.Queued(), f.c.nclaims.Load())
	}
}
