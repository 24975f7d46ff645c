package h1pool

import "time"

// Warm-ahead (Config.WarmAhead): a pool only grows when a request finds it
// empty and dials, so without more the pools follow the highest number of
// simultaneous requests each host has seen, and every new high costs
// requests a dial. When a request to a host finds it with fewer open
// connections (idle or in use) than the peak of requests in flight (the
// Transport's own, or a higher one given to RaisePeak: a gateway's
// requests in flight, all hosts' together, the most one host can get), a
// warmer goroutine dials the difference in the background, within
// Config.MaxIdlePerHost (and Config.MaxConnsPerHost). Once that peak has
// been seen, a request at that concurrency finds an idle connection. A
// server that closes idle connections itself (a keep-alive timeout shorter
// than the Transport's; uvicorn's default is 5 s) is not warmed for
// Config.IdleTimeout after it last did: its warmed connections would only
// be closed and dialed again.
//
// The connections a warmer brings a host to are kept however long they are
// idle (keepLocked); Config.IdleTimeout closes only those beyond. The peak
// is the gateway's requests in flight to all hosts together, so a host
// that gets fewer at once leaves the bottom of its stack unused; closed
// after IdleTimeout, those connections were dialed again by the warmer at
// the host's next request, and a pool at a steady load closed and redialed
// them every IdleTimeout (TestTransportKeepsIdleConnectionsTheWarmerWouldRedial).
// A server that closes them itself is found out by the peek before reuse,
// and then warming, and with it the keeping, stops for IdleTimeout.
//
// Kept however long they are idle by the pool, they are not by every
// server: vLLM's (uvicorn) closes a connection idle for 5 s after its last
// response (VLLM_HTTP_TIMEOUT_KEEP_ALIVE), SGLang's too. So when every
// connection a host has is one the warmer keeps, a request takes the
// bottom of the stack instead of its top once that connection has been
// idle for rotateAfter: at a steady load, which leaves the same
// connections at the bottom, each is used again before such a server
// closes it, and the next peak finds them open, not closed (a request
// that waits for a dial, and warming stopped for IdleTimeout). Beyond
// what the warmer keeps the stack stays LIFO, and its bottom is left to
// the idle timeout.
//
// The peak is not kept forever (Config.PeakWindow): it is the highest
// number of requests in flight over the current window and the one before,
// and a host that got no request within a window is not kept warm at all.
// A burst of 256 concurrent requests once would otherwise have every engine
// hold 256 connections (36 KiB of buffers each on the gateway's side, and
// the engine's) until the engine closed them, and an engine removed from
// the pool would keep its connections for good. After a window or two of
// lower traffic the connections beyond its peak are closed like any others
// idle past IdleTimeout, by the next request to their host or by the sweep.
//
// A warmed connection waits apart from the stack, in fresh, and the next
// request to its host takes it before any connection on the stack. On the
// stack it would sink under the connections that requests in flight give
// back after it was pooled, and wait unused for as long as the host's
// concurrency stays below its depth; but a server may close a connection
// that has carried no request after a timeout of its own, which runs from
// the accept, while it keeps one that has carried a request: a Go net/http
// server's ReadHeaderTimeout does. A warmed connection that sank would be
// found closed at the next peak, dropped and dialed again by a request that
// waits for it, and would stop the host's warming for Config.IdleTimeout.

// rotateAfter is how long the connection at the bottom of a host's stack
// may stay idle, when the warmer keeps all the host has, before a request
// takes it before the top: well within uvicorn's default keep-alive
// timeout (5 s, vLLM's and SGLang's), so that the connection is reused
// before the server closes it, not found closed nor written to as it
// closes.
const rotateAfter = 2 * time.Second

// RaisePeak records n requests in flight (the Transport's, or its user's:
// a gateway's inference requests) as the current window's peak when it is
// one; the warmers bring each host to it (see Config.PeakWindow).
func (t *Transport) RaisePeak(n int64) {
	for {
		p := t.peak.Load()
		if n <= p || t.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// warmDial is a warmer's dial in progress: one request whose pool is empty
// may claim it and wait for it (done closes once the connection is pooled,
// or the dial failed) instead of dialing a connection of its own. t.mu
// guards claimed.
type warmDial struct {
	done    chan struct{}
	claimed bool
}

// warmTarget is the open connections a warmer brings a host to: the peak of
// requests in flight over the current window and the one before
// (Config.PeakWindow), within MaxIdlePerHost and MaxConnsPerHost. t.mu is
// held.
func (t *Transport) warmTarget(now time.Time) int {
	n := min(int(t.peakLocked(now)), t.cfg.MaxIdlePerHost)
	if c := t.cfg.MaxConnsPerHost; c > 0 {
		n = min(n, c)
	}
	return n
}

// peakLocked returns the peak of requests in flight over the current
// window and the one before, starting a new window when the current one
// is over: its peak becomes the one before, and the new window's starts at
// the requests in flight now (RaisePeak and RoundTrip raise it from
// there). A window is only started here, when a request, a warmer or a
// sweep looks, so a peak may be remembered somewhat longer than two
// windows, never shorter than one. With a negative Config.PeakWindow the
// window never ends. t.mu is held.
func (t *Transport) peakLocked(now time.Time) int64 {
	if w := t.cfg.PeakWindow; w > 0 && now.Sub(t.winStart) >= w {
		t.winStart = now
		t.peakPrev.Store(t.peak.Swap(t.busy.Load()))
	}
	return max(t.peak.Load(), t.peakPrev.Load())
}

// keepLocked is how many of key's connections the warmer brings it to now:
// warmTarget when warming is on, the Transport open, the host not
// forgotten (Retain), got a request within the last Config.PeakWindow and
// its server has not closed an idle connection lately, else 0. The pool
// keeps that many however long they are idle: closed after
// Config.IdleTimeout, they would be dialed again at the next request. t.mu
// is held.
func (t *Transport) keepLocked(key string, now time.Time) int {
	if !t.cfg.WarmAhead || t.stopped || t.forgotten[key] {
		return 0
	}
	if at, ok := t.peerClosedAt[key]; ok && now.Sub(at) < t.cfg.IdleTimeout {
		return 0
	}
	if w := t.cfg.PeakWindow; w > 0 && now.Sub(t.lastUse[key]) >= w {
		return 0 // no request for a window: an engine gone from the pool, or one the traffic left
	}
	return t.warmTarget(now)
}

// warmLocked starts key's warmer when warming is on, the host has fewer
// open connections than the peak of requests in flight, none runs, the
// Transport is open and the server has not closed an idle connection
// lately. t.mu is held.
func (t *Transport) warmLocked(key string, now time.Time) {
	if t.warming[key] || t.open[key] >= t.keepLocked(key, now) {
		return
	}
	t.warming[key] = true
	t.warmers.Add(1)
	go t.warm(key)
}

// warm dials connections to key one at a time and puts each in its pool,
// until the host has warmTarget open, a dial fails or Close comes.
func (t *Transport) warm(key string) {
	defer t.warmers.Done()
	for {
		t.mu.Lock()
		if t.stopped || t.open[key] >= t.keepLocked(key, t.clk.Now()) {
			delete(t.warming, key)
			t.mu.Unlock()
			return
		}
		t.open[key]++ // counted before the dial, as get does
		wd := &warmDial{done: make(chan struct{})}
		t.warmDial[key] = wd
		t.mu.Unlock()
		pc, err := t.dial(t.warmCtx, key)
		if err == nil {
			// Counted before put, while the dial holds the host's place in
			// open: put closes the connection of a host Retain forgot
			// meanwhile, and with its last connection the host's entries
			// go, the count with them (counted after, it stayed behind).
			t.mu.Lock()
			t.countDialLocked(key, false)
			t.mu.Unlock()
			t.put(pc, true)
		}
		t.mu.Lock()
		delete(t.warmDial, key)
		if err != nil {
			t.closedLocked(key)
			delete(t.warming, key)
		}
		t.mu.Unlock()
		close(wd.done) // the request waiting for this dial looks again
		if err != nil {
			return
		}
	}
}

// WaitWarmers waits for the warmers running now to finish. With no request
// in flight none starts meanwhile: a test's way to read settled counts.
func (t *Transport) WaitWarmers() { t.warmers.Wait() }
