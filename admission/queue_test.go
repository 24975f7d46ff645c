package admission

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/kvroute/kvroute"
)

func TestHigherBandAlwaysDispatchesFirst(t *testing.T) {
	f := newFixture(t, Config{Objectives: []Objective{{Name: "hi", Priority: 5}, {Name: "lo", Priority: 1}}})
	f.det.set("a:1", true)
	out := make(chan result, 3)
	f.admit(t, ctxFor("lo", ""), "lo1", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("lo", ""), "lo2", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("hi", ""), "hi1", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	for _, want := range []string{"hi1", "lo1", "lo2"} {
		f.c.Notify("a:1") // one release: one request
		r := take(t, out)
		if r.tag != want || r.err != nil {
			t.Fatalf("got %s (%v), want %s", r.tag, r.err, want)
		}
	}
	if got := f.count("5", outcomeDispatched) + f.count("1", outcomeDispatched); got != 3 {
		t.Fatalf("dispatched %v, want 3", got)
	}
}

// Priorities at the ends of int's range are valid: the bands are still
// ordered highest first (no overflow comparing them), so the highest band
// dispatches first and a full queue pushes out the sheddable band's requests
// for it.
func TestHigherBandDispatchesFirstAtExtremePriorities(t *testing.T) {
	f := newFixture(t, Config{
		MaxQueuedRequests: 2,
		DefaultPriority:   math.MaxInt,
		Objectives:        []Objective{{Name: "top", Priority: math.MaxInt}, {Name: "batch", Priority: -2}},
	})
	f.det.set("a:1", true)
	out := make(chan result, 8)
	f.admit(t, ctxFor("top", ""), "top0", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.c.Notify("") // top0 leaves; a:1 is claimed until its accounting moves
	if r := take(t, out); r.tag != "top0" || r.err != nil {
		t.Fatalf("got %s (%v), want top0", r.tag, r.err)
	}
	f.admit(t, ctxFor("batch", ""), "batch1", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("top", ""), "top1", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("top", ""), "top2", tokensReq(10), oneEP, out) // full: batch1 is pushed out
	if r := take(t, out); r.tag != "batch1" || !errors.Is(r.err, ErrShed) {
		t.Fatalf("got %s (%v), want batch1 shed", r.tag, r.err)
	}
	f.admit(t, ctxFor("batch", ""), "batch2", tokensReq(10), oneEP, out)
	if r := take(t, out); r.tag != "batch2" || !errors.Is(r.err, ErrShed) {
		t.Fatalf("got %s (%v), want batch2 shed (the queue holds only the top band)", r.tag, r.err)
	}
	for _, want := range []string{"top1", "top2"} {
		f.c.Notify("a:1") // one release: one request
		if r := take(t, out); r.tag != want || r.err != nil {
			t.Fatalf("got %s (%v), want %s", r.tag, r.err, want)
		}
	}
}

func TestRoundRobinAlternatesFlowsOfABand(t *testing.T) {
	f := newFixture(t, Config{})
	f.det.set("a:1", true)
	out := make(chan result, 6)
	for range 3 {
		f.admit(t, ctxFor("", "A"), "A", tokensReq(10), oneEP, out)
	}
	for range 3 {
		f.admit(t, ctxFor("", "B"), "B", tokensReq(10), oneEP, out)
	}
	f.det.set("a:1", false)
	var got string
	for range 6 {
		f.c.Notify("a:1")
		got += take(t, out).tag
	}
	if got != "ABABAB" {
		t.Fatalf("order %s, want ABABAB", got)
	}
}

// A flow that had nothing queued takes the next turn when it comes back:
// joining behind the flow just served would give that flow a second turn
// first, and a small tenant that empties often would lose a turn each time.
func TestRoundRobinReturningFlowTakesTheNextTurn(t *testing.T) {
	f := newFixture(t, Config{})
	f.det.set("a:1", true)
	out := make(chan result, 4)
	for range 3 {
		f.admit(t, ctxFor("", "A"), "A", tokensReq(10), oneEP, out)
	}
	f.det.set("a:1", false)
	f.c.Notify("a:1")
	got := take(t, out).tag
	f.admit(t, ctxFor("", "B"), "B", tokensReq(10), oneEP, out)
	for range 3 {
		f.c.Notify("a:1")
		got += take(t, out).tag
	}
	if got != "ABAA" {
		t.Fatalf("order %s, want ABAA", got)
	}
}

// New flows take their turn after the flows already waiting: a steady
// arrival of new fairness IDs, one per release, does not keep the
// backlogged flows A and B from theirs, whether each new flow stays in the
// ring for a while (two requests) or leaves it once served (one). A new
// flow used to take the very next turn, so new flows with two requests
// each were served back to back and B never was (order APQRSTU).
func TestRoundRobinNewFlowsDoNotStarveABackloggedFlow(t *testing.T) {
	for _, perFlow := range []int{2, 1} {
		f := newFixture(t, Config{})
		f.det.set("a:1", true)
		out := make(chan result, 64)
		for range 3 {
			f.admit(t, ctxFor("", "A"), "A", tokensReq(10), oneEP, out)
		}
		for range 3 {
			f.admit(t, ctxFor("", "B"), "B", tokensReq(10), oneEP, out)
		}
		f.det.set("a:1", false)
		f.c.Notify("a:1")
		got := take(t, out).tag
		for i := range 6 {
			flow := string(rune('P' + i)) // a new fairness ID
			for range perFlow {
				f.admit(t, ctxFor("", flow), flow, tokensReq(10), oneEP, out)
			}
			f.c.Notify("a:1") // one release: one request
			got += take(t, out).tag
		}
		// Each new flow joins at the end of the round, before the flow
		// served last: A, B, then P (joined before A's second turn), A, Q
		// (joined before B's), B, R.
		if got != "ABPAQBR" {
			t.Fatalf("%d requests per new flow: order %s, want ABPAQBR", perFlow, got)
		}
	}
}

func TestDeficitRoundRobinSharesPromptTokens(t *testing.T) {
	f := newFixture(t, Config{Fairness: DeficitRoundRobin, Quantum: 1000})
	f.det.set("a:1", true)
	out := make(chan result, 20)
	for range 4 {
		f.admit(t, ctxFor("", "long"), "long", tokensReq(1000), oneEP, out)
	}
	for range 16 {
		f.admit(t, ctxFor("", "short"), "short", tokensReq(250), oneEP, out)
	}
	f.det.set("a:1", false)
	tokens := map[string]int{}
	for range 10 {
		f.c.Notify("a:1")
		r := take(t, out)
		if r.tag == "long" {
			tokens[r.tag] += 1000
		} else {
			tokens[r.tag] += 250
		}
	}
	// Ten dispatches = two rounds of 1,000 tokens each per flow.
	if tokens["long"] != 2000 || tokens["short"] != 2000 {
		t.Fatalf("tokens per flow %v, want 2000 each", tokens)
	}
}

func TestEarliestDeadlineFirstWithinAFlow(t *testing.T) {
	f := newFixture(t, Config{Ordering: EarliestDeadline})
	f.det.set("a:1", true)
	out := make(chan result, 3)
	for _, d := range []struct {
		tag string
		in  time.Duration
	}{{"10s", 10 * time.Second}, {"5s", 5 * time.Second}, {"7s", 7 * time.Second}} {
		f.admit(t, WithDeadline(context.Background(), t0.Add(d.in)), d.tag, tokensReq(10), oneEP, out)
	}
	f.det.set("a:1", false)
	var got []string
	for range 3 {
		f.c.Notify("a:1")
		got = append(got, take(t, out).tag)
	}
	if got[0] != "5s" || got[1] != "7s" || got[2] != "10s" {
		t.Fatalf("order %v, want [5s 7s 10s]", got)
	}
}

func TestRequestForAnIdleEndpointDoesNotWaitBehindABusyOne(t *testing.T) {
	f := newFixture(t, Config{})
	f.det.set("a:1", true)
	out := make(chan result, 2)
	f.admit(t, ctxFor("", "A"), "busy", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("", "B"), "idle", tokensReq(10), []kvroute.Endpoint{{ID: "b:1"}}, out)
	if r := take(t, out); r.tag != "idle" || r.err != nil {
		t.Fatalf("got %s (%v), want idle", r.tag, r.err)
	}
	if f.c.Queued() != 1 {
		t.Fatalf("queued %d, want 1", f.c.Queued())
	}
}

func TestSheddableIsShedAtOnceWhenSaturated(t *testing.T) {
	f := newFixture(t, Config{Objectives: []Objective{{Name: "batch", Priority: -1}}})
	f.det.set("a:1", true)
	err := f.c.Admit(ctxFor("batch", ""), tokensReq(10), oneEP)
	if !errors.Is(err, ErrShed) || Reason(err) != "shed" {
		t.Fatalf("err %v, want ErrShed", err)
	}
	if f.count("-1", outcomeShed) != 1 || f.c.Queued() != 0 {
		t.Fatal("shed request not counted, or queued")
	}
}

func TestFullQueuePushesOutTheOldestSheddableFirst(t *testing.T) {
	f := newFixture(t, Config{
		MaxQueuedRequests: 2,
		Objectives:        []Objective{{Name: "chat", Priority: 1}, {Name: "batch", Priority: -1}},
	})
	f.det.set("a:1", true)
	out := make(chan result, 8)
	f.admit(t, ctxFor("chat", ""), "chat1", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.c.Notify("") // chat1 leaves; a:1 is claimed until its accounting moves
	if r := take(t, out); r.tag != "chat1" || r.err != nil {
		t.Fatalf("got %s (%v), want chat1", r.tag, r.err)
	}
	f.admit(t, ctxFor("batch", ""), "batch1", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("batch", ""), "batch2", tokensReq(10), oneEP, out)
	f.admit(t, ctxFor("chat", ""), "chat2", tokensReq(10), oneEP, out)
	if r := take(t, out); r.tag != "batch1" || !errors.Is(r.err, ErrShed) {
		t.Fatalf("got %s (%v), want batch1 shed", r.tag, r.err)
	}
	f.admit(t, ctxFor("chat", ""), "chat3", tokensReq(10), oneEP, out)
	if r := take(t, out); r.tag != "batch2" || !errors.Is(r.err, ErrShed) {
		t.Fatalf("got %s (%v), want batch2 shed", r.tag, r.err)
	}
	err := f.c.Admit(ctxFor("chat", ""), tokensReq(10), oneEP)
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("chat4: %v, want ErrQueueFull", err)
	}
	if f.count("-1", outcomeShed) != 2 || f.count("1", outcomeQueueFull) != 1 {
		t.Fatal("outcomes not counted")
	}
}

func TestQueueIsBoundedInBytes(t *testing.T) {
	f := newFixture(t, Config{MaxQueuedBytes: 1000})
	f.det.set("a:1", true)
	out := make(chan result, 1)
	f.admit(t, context.Background(), "fits", tokensReq(200), oneEP, out) // 800 bytes
	err := f.c.Admit(context.Background(), tokensReq(100), oneEP)        // 400 more
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("err %v, want ErrQueueFull", err)
	}
	if got := f.c.Queued(); got != 1 {
		t.Fatalf("queued %d, want 1", got)
	}
}

// A full queue pushes sheddable requests out only when that lets the new
// request in: when pushing out every one of them would still leave too
// little room, none is shed and the new request alone is refused.
func TestFullQueueShedsOnlyWhenSheddingMakesRoom(t *testing.T) {
	f := newFixture(t, Config{MaxQueuedBytes: 1000, Objectives: gateObjectives})
	f.det.set("a:1", true)
	out := make(chan result, 4)
	f.admit(t, ctxFor("chat", ""), "chat1", tokensReq(10), oneEP, out)
	f.det.set("a:1", false)
	f.c.Notify("") // chat1 leaves; a:1 stays claimed, unsaturated
	if r := take(t, out); r.tag != "chat1" || r.err != nil {
		t.Fatalf("got %s (%v), want chat1", r.tag, r.err)
	}
	f.admit(t, ctxFor("batch", ""), "batch1", tokensReq(25), oneEP, out) // 100 bytes
	f.admit(t, ctxFor("chat", ""), "chat2", tokensReq(200), oneEP, out)  // 800 bytes
	// 300 more bytes: pushing out batch1 (100) cannot make room (800+300 > 1000).
	if err := f.c.Admit(ctxFor("chat", ""), tokensReq(75), oneEP); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("chat3: %v, want ErrQueueFull", err)
	}
	if got := f.count("-1", outcomeShed); got != 0 || f.c.Queued() != 2 || !pending(out) {
		t.Fatalf("batch1 shed (%v) although that did not let chat3 in; queued %d", got, f.c.Queued())
	}
	// 150 more bytes: pushing out batch1 makes room (800+150 <= 1000).
	f.admit(t, ctxFor("chat", ""), "chat4", tokensReq(37), oneEP, out)
	if r := take(t, out); r.tag != "batch1" || !errors.Is(r.err, ErrShed) {
		t.Fatalf("got %s (%v), want batch1 shed", r.tag, r.err)
	}
	if f.c.Queued() != 2 || f.count("1", outcomeQueueFull) != 1 {
		t.Fatalf("queued %d, queue_full %v; want chat2 and chat4 queued, chat3 refused", f.c.Queued(), f.count("1", outcomeQueueFull))
	}
}

// A full queue refuses, or makes room by pushing out sheddable requests,
// only for a request that would wait in it. One whose candidate is free,
// with the queue served first, leaves at once whatever the queue holds: a
// queue filled by one model's saturated endpoints refused every request
// for another model's idle ones (429), or shed queued work to let in a
// request that never stayed.
func TestFullQueueAdmitsARequestWhoseCandidateIsFree(t *testing.T) {
	epB := []kvroute.Endpoint{{ID: "b:1"}}
	for _, queued := range []string{"chat", "batch"} {
		f := newFixture(t, Config{MaxQueuedRequests: 1, Objectives: gateObjectives})
		f.det.set("b:1", true)
		out := make(chan result, 2)
		if queued == "batch" {
			// A sheddable request queues only for an endpoint that is not
			// saturated: b:1, claimed by a request released to it.
			f.admit(t, ctxFor("chat", "t"), "first", tokensReq(10), epB, out)
			f.det.set("b:1", false)
			f.c.Notify("")
			if r := take(t, out); r.err != nil {
				t.Fatal(r.err)
			}
		}
		f.admit(t, ctxFor(queued, "t"), "waits", tokensReq(10), epB, out)
		if f.c.Queued() != 1 {
			t.Fatalf("%s request for b:1 not queued", queued)
		}
		for _, obj := range []string{"chat", "batch"} {
			if err := f.c.Admit(ctxFor(obj, "other"), tokensReq(10), oneEP); err != nil {
				t.Fatalf("queue holding %s: %s request for the idle a:1: %v, want admitted", queued, obj, err)
			}
			if f.c.Queued() != 1 || f.count("-1", outcomeShed) != 0 {
				t.Fatalf("queue holding %s: the request waiting for b:1 was pushed out for a %s request that did not wait", queued, obj)
			}
		}
		if queued == "chat" { // a request that would wait is still refused
			if err := f.c.Admit(ctxFor("chat", "other"), tokensReq(10), epB); !errors.Is(err, ErrQueueFull) {
				t.Fatalf("chat for b:1: %v, want ErrQueueFull", err)
			}
		}
	}
}

// TestDeficitRoundRobinHugeQuantum: a quantum near math.MaxInt64 is a valid
// configuration (every flow affords any request in one round); granting it
// must not overflow and spin the dispatch pass under the Controller's lock.
func TestDeficitRoundRobinHugeQuantum(t *testing.T) {
	for _, q := range []int64{math.MaxInt64, math.MaxInt64 - 10, math.MaxInt64/2 + 1} {
		f := newFixture(t, Config{Fairness: DeficitRoundRobin, Quantum: q})
		f.det.set("a:1", true)
		out := make(chan result, 4)
		for _, flow := range []string{"A", "B", "A", "B"} {
			f.admit(t, ctxFor("", flow), flow, tokensReq(300), oneEP, out)
		}
		f.det.set("a:1", false)
		got := map[string]int{}
		for range 4 {
			f.c.Notify("a:1")
			r := take(t, out)
			if r.err != nil {
				t.Fatalf("quantum %d: %s: %v", q, r.tag, r.err)
			}
			got[r.tag]++
		}
		if got["A"] != 2 || got["B"] != 2 {
			t.Fatalf("quantum %d: dispatched %v, want 2 of each flow", q, got)
		}
	}
}
