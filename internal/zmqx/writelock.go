package zmqx

// writeLock serialises the writes of one connection. Unlike a sync.Mutex
// it can be waited for alongside other events (the heartbeat's lockFor):
// without Options.WriteTimeout, a message write to a peer that reads
// nothing blocks holding it for as long as the connection lives, and the
// heartbeat, whose PING waits for it, must still be able to judge the peer.
// A guardConn's constructor makes it; its zero value is not usable.
type writeLock chan struct{}

// newWriteLock returns an unlocked writeLock.
func newWriteLock() writeLock { return make(writeLock, 1) }

// Lock waits for the lock.
func (l writeLock) Lock() { l <- struct{}{} }

// Unlock releases the lock, which must be held.
func (l writeLock) Unlock() { <-l }
