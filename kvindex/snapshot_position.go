package kvindex

import "sync"

// MaxPositionBytes bounds an endpoint's stream position. Positions are
// small (a sequence number, a digest and the subscriber's few facts about
// the stream, such as its cache groups' kinds); the bound keeps a snapshot
// reader from allocating for a forged length.
const MaxPositionBytes = 4096

// PositionLock is one endpoint's snapshot exclusion and its stream
// position: the point of the endpoint's event stream the index reflects.
// The index treats the position as opaque bytes; the event subscriber
// (kvevents) defines what they mean (the last applied sequence and a digest
// of that batch's payload) and sets them.
//
// An event subscriber applies one batch as several Store, Remove and Clear
// calls. Holding the endpoint's PositionLock across the whole batch and
// setting the new position before releasing it makes the batch and the
// position atomic with respect to WriteSnapshot, which takes the same lock
// while it copies the endpoint's section. Without it a snapshot taken
// mid-batch would carry the previous batch's position with part of the
// next batch's stores, and resuming would apply those reference-counted
// stores twice.
//
// Match never takes this lock; other endpoints' writers never meet it.
type PositionLock struct {
	mu  sync.Mutex
	pos []byte
	has bool
}

// LockPosition returns endpoint's PositionLock, locked. The caller applies
// one batch of the endpoint's events, then calls Set (or Clear) and Unlock.
// The lock exists per endpoint name and outlives Clear, so a position can
// be recorded for an endpoint whose entries are all gone.
func (ix *Index) LockPosition(endpoint string) *PositionLock {
	l := ix.positionLock(endpoint, true)
	l.mu.Lock()
	return l
}

// Set records pos (copied; at most MaxPositionBytes, longer positions are
// not recorded and leave none) as the endpoint's position. The lock must be
// held.
func (l *PositionLock) Set(pos []byte) {
	if len(pos) > MaxPositionBytes {
		l.pos, l.has = l.pos[:0], false
		return
	}
	l.pos = append(l.pos[:0], pos...)
	l.has = true
}

// Clear forgets the endpoint's position (its entries were cleared, so it
// reflects no point of any stream). The lock must be held.
func (l *PositionLock) Clear() { l.pos, l.has = l.pos[:0], false }

// Unlock releases the lock.
func (l *PositionLock) Unlock() { l.mu.Unlock() }

// Position returns a copy of endpoint's recorded position and whether it
// has one.
func (ix *Index) Position(endpoint string) ([]byte, bool) {
	l := ix.positionLock(endpoint, false)
	if l == nil {
		return nil, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.has {
		return nil, false
	}
	return append([]byte(nil), l.pos...), true
}

// ForgetPosition drops endpoint's position and its lock, for an endpoint
// that left the pool (so the lock table does not grow with endpoint churn).
// A writer that still holds the old lock keeps it; its position is then
// not part of later snapshots.
func (ix *Index) ForgetPosition(endpoint string) { ix.positions.Delete(endpoint) }

func (ix *Index) positionLock(endpoint string, create bool) *PositionLock {
	if v, ok := ix.positions.Load(endpoint); ok {
		return v.(*PositionLock)
	}
	if !create {
		return nil
	}
	v, _ := ix.positions.LoadOrStore(endpoint, new(PositionLock))
	return v.(*PositionLock)
}
