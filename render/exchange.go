package render

import (
	"context"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// A hedged render runs each of its attempts as an exchange: one HTTP
// attempt in a goroutine of its own, so that the caller can stop waiting for
// the loser without aborting it.
//
// Why not simply cancel the loser: renderers speak HTTP/1.1, where the only
// way to abort a request in flight is to close its connection. A renderer
// that already has the whole request tokenizes it anyway (vLLM's render
// routes do not stop on a client's disconnect), so closing saves the
// renderer nothing and costs the gateway a new connection for every lost
// hedge — about one render in twenty when hedging at the recent p95. So a
// loser whose request was written whole is abandoned: the caller returns at
// once, the exchange reads and discards the answer in the background (its
// endpoint's slot stays taken until then, since the renderer is still
// working, and its latency is a real sample), and the connection goes back
// to the pool. A loser whose request was not yet written whole is canceled;
// that connection is closed when part of the request was sent, and given
// back to the pool when none of it was (internal/h1pool).
//
// Ownership: the exchange's goroutine owns the HTTP attempt and, until it
// claims or loses the answer (state), nothing else writes to res; the caller
// reads err and res only after done is closed, and only when it did not
// abandon the exchange.
type exchange struct {
	c      *Client
	m      *metrics // where the loser is counted (Client.metricsFor)
	cancel context.CancelFunc
	wrote  atomic.Bool  // the request is whole in the connection's write buffer (WroteRequest, before its last flush, which goes on without the caller): abandoning it leaves its connection open
	state  atomic.Int32 // exchRunning, then exchClaimed, exchAbandoned or exchFinished
	done   chan struct{}
	err    *Error // the attempt's outcome, once done is closed
}

const (
	exchRunning   int32 = iota
	exchClaimed         // the attempt is writing its answer into the caller's Result
	exchAbandoned       // the caller left; the answer is read and discarded
	exchFinished        // the attempt ended unclaimed and unabandoned (it failed)
)

// errAbandoned is what an abandoned attempt returns once it has read (and
// discarded) its answer.
var errAbandoned = &Error{Reason: ReasonCanceled, Err: context.Canceled}

// launch starts one attempt on t, whose slot the caller has taken, in its
// own goroutine; the exchange releases the slot when the attempt ends. The
// attempt keeps ctx's values and deadline but not its cancellation: the
// caller's going away cancels it (through an AfterFunc) unless it was
// abandoned, and Close cancels it once abandoned.
func (c *Client) launch(ctx context.Context, t *target, r route, body *wireBody, auth string, n int, res *Result) *exchange {
	e := &exchange{c: c, m: c.metricsFor(body), done: make(chan struct{})}
	ectx := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		ectx, e.cancel = context.WithDeadline(ectx, dl)
	} else {
		ectx, e.cancel = context.WithCancel(ectx)
	}
	ectx = httptrace.WithClientTrace(ectx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				e.wrote.Store(true)
				if h := c.wroteHook; h != nil {
					h()
				}
			}
		},
	})
	stopCaller := context.AfterFunc(ctx, func() {
		if e.state.Load() != exchAbandoned {
			e.cancel()
		}
	})
	stopLife := context.AfterFunc(c.life, e.cancelAbandoned)
	go func() {
		start := c.now()
		err := c.tracedAttempt(ectx, t, r, body, auth, n, res, e)
		d := c.now().Sub(start)
		t.st.gate.release()
		stopCaller()
		stopLife()
		// Observed before the exchange's own cancel, which would make every
		// ending look like a cancellation.
		if err == errAbandoned {
			t.st.latency.observe(d) // the renderer answered: a real sample
		} else {
			observeLatency(ectx, t, d, err)
		}
		e.cancel()
		e.err = err
		// The end and an abandonment race on state: exactly one of the
		// two moves it from running, so a background count added by
		// abandon is always matched here.
		abandoned := !e.state.CompareAndSwap(exchRunning, exchFinished) && e.state.Load() == exchAbandoned
		close(e.done)
		if abandoned {
			c.background.Done()
		}
	}()
	return e
}

// cancelAbandoned cancels e if the caller abandoned it: Close ends the
// Client's life, and the losers in the background with it.
func (e *exchange) cancelAbandoned() {
	if e.state.Load() == exchAbandoned {
		e.cancel()
	}
}

// claim is called by the attempt once it has the whole answer, before it
// decodes into the caller's Result: false when the caller has abandoned the
// exchange (the answer is then discarded).
func (e *exchange) claim() bool {
	return e.state.CompareAndSwap(exchRunning, exchClaimed)
}

// abandon makes the caller stop waiting for e. A request written whole is
// left to finish in the background (its connection survives), canceled
// there when Close has begun; one not yet written, or an exchange of a
// closed Client, is canceled and waited for, as is one that already claimed
// its answer (it is only decoding).
func (e *exchange) abandon() {
	c := e.c
	c.backgroundMu.Lock()
	drain := e.wrote.Load() && !c.backgroundClosed
	if drain {
		c.background.Add(1)
	}
	c.backgroundMu.Unlock()
	if drain {
		if e.state.CompareAndSwap(exchRunning, exchAbandoned) {
			e.m.loserDrained.Inc()
			// Close may have ended the Client's life before this
			// abandonment: cancelAbandoned then found the exchange still
			// running and left it. Either it sees the abandonment or
			// this sees the life ended, so Close cancels every loser it
			// waits for.
			if c.life.Err() != nil {
				e.cancel()
			}
			return
		}
		c.background.Done()
	}
	if e.state.Load() == exchFinished {
		return // it failed on its own before the winner answered
	}
	e.cancel()
	<-e.done
	if e.err != nil {
		e.m.loserCanceled.Inc() // it ended without an answer; a request in flight closed its connection
	}
}

// backgroundGroup is the Client's count of abandoned exchanges still
// reading their answers; Close cancels and waits for them.
type backgroundGroup struct {
	background       sync.WaitGroup
	backgroundMu     sync.Mutex // guards backgroundClosed against background.Add
	backgroundClosed bool
}

// closeBackground stops new abandonments, cancels the running ones (through
// the life context the caller cancels first) and waits for them.
func (b *backgroundGroup) closeBackground() {
	b.backgroundMu.Lock()
	b.backgroundClosed = true
	b.backgroundMu.Unlock()
	b.background.Wait()
}
