package zmqx

import "github.com/kvroute/kvroute/telemetry"

// pingResult is what became of the heartbeat's attempt to send a PING.
type pingResult int

const (
	pingSent   pingResult = iota // written, or pending at the next message boundary
	pingFailed                   // the write failed (the connection is closed)
	pingDead                     // the peer is dead: the PING could not go out, and nothing arrived
	pingClosed                   // the connection closed while the PING waited
)

// ping sends a PING as injectCommand does, but waits for the write lock at
// most the heartbeat timeout on clk at a time. Without
// Options.WriteTimeout a message write to a peer that reads nothing blocks
// holding the lock for as long as the connection lives; a PING waiting
// behind it is one the peer has not been able to read, as a PING queued
// behind a message is in libzmq, so the heartbeat's rule applies to it:
// when the timeout passes with nothing arrived from the peer since before
// (hb.readBytes then, and no byte waiting unread), the peer is dead
// (pingDead). While traffic keeps arriving the wait goes on, a timeout at
// a time.
func (g *guardConn) ping(clk telemetry.Clock, before uint64) pingResult {
	hb := g.hb
	select {
	case g.wmu <- struct{}{}:
	default:
		t := clk.NewTimer(hb.timeout)
		defer t.Stop()
	wait:
		for {
			select {
			case g.wmu <- struct{}{}:
				break wait
			case <-hb.done:
				return pingClosed
			case <-t.C():
				now := hb.readBytes.Load()
				if !unreadBytes(g.Conn) && now == before {
					return pingDead
				}
				before = now
				t.Reset(hb.timeout)
			}
		}
	}
	defer g.wmu.Unlock()
	if err := g.injectCommandLocked(pingCommand); err != nil {
		return pingFailed
	}
	return pingSent
}
