package h1pool

import "maps"

// CloseReason is why the Transport closed a connection.
type CloseReason int

// The reasons of a close, as Stats counts them and Config.OnClose is told.
const (
	// CloseCanceled: the request's context ended while the connection
	// carried it, some of the request sent (HTTP/1.1 has no other way to
	// abort a request in flight). One that ended before any byte was sent
	// gives the connection back to the pool.
	CloseCanceled CloseReason = iota
	// CloseBroken: the exchange failed (a write or read error, a response
	// header too large, a 101 Switching Protocols answer) or its body was
	// closed before its end.
	CloseBroken
	// CloseAsked: the server closed the connection (found closed while
	// idle, or closed before answering a reused one) or either side asked
	// for the close (Connection: close).
	CloseAsked
	// CloseIdle: the connection was idle past Config.IdleTimeout, the idle
	// pool was full, or CloseIdleConnections came.
	CloseIdle
	numCloseReasons
)

var closeReasonNames = [numCloseReasons]string{"canceled", "broken", "asked", "idle"}

// String returns the reason's name: canceled, broken, asked or idle (a
// metric's label value).
func (r CloseReason) String() string {
	if r < 0 || r >= numCloseReasons {
		return "unknown"
	}
	return closeReasonNames[r]
}

// CloseReasons lists every CloseReason, in order.
func CloseReasons() []CloseReason {
	return []CloseReason{CloseCanceled, CloseBroken, CloseAsked, CloseIdle}
}

// Stats are a Transport's counts since New.
type Stats struct {
	// Dials is the connections dialed, warmed ones included.
	Dials int64
	// Waited is those of Dials that a request dialed and waited for.
	Waited int64
	// Closes is the connections closed, by CloseReason.
	Closes [numCloseReasons]int64
	// Peak is the peak of requests in flight (RaisePeak included) over
	// the current window and the one before (Config.PeakWindow).
	Peak int64
	// Resends is the requests sent a second time, on a new connection,
	// because the server closed the reused one before any byte of answer
	// (see Transport.RoundTrip).
	Resends int64
}

// Stats returns the Transport's counts.
func (t *Transport) Stats() Stats {
	s := Stats{Dials: t.dials.Load(), Waited: t.waited.Load(), Peak: max(t.peak.Load(), t.peakPrev.Load()),
		Resends: t.resends.Load()}
	for i := range s.Closes {
		s.Closes[i] = t.closes[i].Load()
	}
	return s
}

// DialCount counts the connections dialed to one host.
type DialCount struct {
	// Dials is all of them, warmed ones included.
	Dials int64
	// Waited is those a request dialed (and waited for).
	Waited int64
}

// countDialLocked counts a connection dialed to key (by a request that
// waited for it when waited). t.mu is held.
func (t *Transport) countDialLocked(key string, waited bool) {
	n := t.dialed[key]
	n.Dials++
	if waited {
		n.Waited++
	}
	t.dialed[key] = n
}

// DialedTo returns the connections dialed to each host (by its
// host:port) since it last had none open.
func (t *Transport) DialedTo() map[string]DialCount {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.dialed)
}

// OpenConns returns the connections to each host:port, idle, in use or
// being dialed.
func (t *Transport) OpenConns() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.open)
}

// IdleConns returns the number of idle connections to hostPort, warmed
// ones included.
func (t *Transport) IdleConns(hostPort string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idle[hostPort]) + len(t.fresh[hostPort])
}

// PeerClosedIdle reports whether hostPort's server was found to have closed
// an idle connection (which stops its warming for Config.IdleTimeout) and
// the mark is still held: the first sweep after it is IdleTimeout old
// deletes it, and Retain when it leaves the host out.
func (t *Transport) PeerClosedIdle(hostPort string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.peerClosedAt[hostPort]
	return ok
}
