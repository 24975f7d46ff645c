package h1pool

import (
	"net"
	"net/url"
	"time"
)

// The sweep: without it, an idle connection past Config.IdleTimeout is
// closed only when a request to its host takes or gives back a connection,
// so the connections to a host no request comes to any more (an engine
// removed from the pool, a renderer scaled away) stayed open until the
// server closed them, and a peak's connections (see Config.PeakWindow)
// were never trimmed on a host whose traffic stopped. While the pool holds
// idle connections, a timer on Config.Clock looks every half IdleTimeout
// (at least every second) and closes, host by host, those idle past
// IdleTimeout beyond what the warmer keeps (keepLocked), oldest first, as
// put does on the way. It also deletes the marks of servers found closing
// an idle connection IdleTimeout ago or more, which keepLocked ignores by
// then: without that every host:port that ever closed one stayed in the
// map, however many engines' pod addresses came and went. No timer runs
// while the pool holds none.

// sweepEvery is the interval between sweeps.
func (t *Transport) sweepEvery() time.Duration {
	return max(t.cfg.IdleTimeout/2, time.Second)
}

// armSweepLocked schedules a sweep when none is pending, the pool holds an
// idle connection and the Transport is open. t.mu is held.
func (t *Transport) armSweepLocked() {
	if t.sweepTimer != nil || t.stopped || (len(t.idle) == 0 && len(t.fresh) == 0) {
		return
	}
	t.sweeps.Add(1)
	t.sweepTimer = t.clk.AfterFunc(t.sweepEvery(), t.sweep)
}

// stopSweepLocked cancels the pending sweep, if any (a sweep already
// running finishes and arms no other: t.stopped is set). t.mu is held.
func (t *Transport) stopSweepLocked() {
	if t.sweepTimer != nil && t.sweepTimer.Stop() {
		t.sweeps.Done()
	}
	t.sweepTimer = nil
}

// sweep closes the idle connections past Config.IdleTimeout that the warmer
// does not keep, on every host, deletes the peer-closed marks as old, and
// arms the next sweep while idle connections remain.
func (t *Transport) sweep() {
	defer t.sweeps.Done()
	now := t.clk.Now()
	var stale []*conn
	t.mu.Lock()
	t.sweepTimer = nil
	keys := make([]string, 0, len(t.idle)+len(t.fresh))
	for key := range t.idle {
		keys = append(keys, key)
	}
	for key := range t.fresh {
		if _, both := t.idle[key]; !both {
			keys = append(keys, key)
		}
	}
	for _, key := range keys {
		excess := t.open[key] - t.keepLocked(key, now) // how many the idle timeout may close
		s, f := t.idle[key], t.fresh[key]
		s, stale = t.pruneStale(s, now, stale, &excess)
		f, stale = t.pruneStale(f, now, stale, &excess)
		t.setIdleLocked(key, s, f)
	}
	for key, at := range t.peerClosedAt {
		if now.Sub(at) >= t.cfg.IdleTimeout {
			delete(t.peerClosedAt, key)
		}
	}
	t.armSweepLocked()
	t.mu.Unlock()
	for _, c := range stale {
		t.drop(c, CloseIdle)
	}
}

// setIdleLocked stores key's idle stack and fresh queue, deleting the
// entries that are empty. t.mu is held.
func (t *Transport) setIdleLocked(key string, s, f []*conn) {
	if len(s) > 0 {
		t.idle[key] = s
	} else {
		delete(t.idle, key)
	}
	if len(f) > 0 {
		t.fresh[key] = f
	} else {
		delete(t.fresh, key)
	}
}

// Retain is for a caller whose set of hosts changed (an engine removed
// from the pool, a renderer scaled away): every host with connections open
// that is not among hostPorts (named as HostPort names them) is forgotten:
// its idle connections are closed at once, those in use as they are given
// back, and it is no longer kept warm. The sweep would close them too, but
// only once idle past Config.IdleTimeout (and, for warmed ones, a
// PeakWindow after the host's last request); a removed engine's
// connections and buffers go at once. The mark of a server found closing an
// idle connection (which stops its warming) goes too, for every host not
// among hostPorts, whether or not it has connections open. A later request
// to a forgotten host is served as to a new one, and ends Retain's mark.
func (t *Transport) Retain(hostPorts []string) {
	keep := make(map[string]bool, len(hostPorts))
	for _, hp := range hostPorts {
		keep[hp] = true
	}
	var gone []*conn
	t.mu.Lock()
	for key := range t.open { // hosts with nothing open leave no mark behind
		if keep[key] {
			continue
		}
		gone = append(gone, t.idle[key]...)
		gone = append(gone, t.fresh[key]...)
		delete(t.idle, key)
		delete(t.fresh, key)
		delete(t.lastUse, key)
		t.forgotten[key] = true
	}
	for key := range t.peerClosedAt {
		if !keep[key] {
			delete(t.peerClosedAt, key)
		}
	}
	t.mu.Unlock()
	for _, c := range gone {
		t.drop(c, CloseIdle)
	}
}

// HostPort returns the host:port under which a Transport pools the
// connections of rawURL: its host when it names a port, else with the
// scheme's default (80, or 443 for https); "" when rawURL does not parse or
// has no host.
func HostPort(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	return hostKey(u)
}

// hostKey is HostPort of a parsed URL, RoundTrip's pool key.
func hostKey(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}
