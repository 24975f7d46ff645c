package bytebudget

import "sync/atomic"

// Budget counts the bytes taken out of Limit. Its zero value has no room;
// set Limit before use and do not change it afterwards. It is safe for
// concurrent use.
type Budget struct {
	// Limit is the most bytes taken at once.
	Limit int64
	used  atomic.Int64
}

// Acquire takes n bytes and reports whether they were free; when they were
// not, nothing is taken.
func (b *Budget) Acquire(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.Limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// Release returns n bytes taken by Acquire.
func (b *Budget) Release(n int64) {
	if n != 0 {
		b.used.Add(-n)
	}
}

// InUse returns the bytes currently taken.
func (b *Budget) InUse() int64 { return b.used.Load() }

// DefaultBodyBytesInFlight is the default budget of request bodies held at
// once by the gateway and by the ext_proc picker: 512 MiB, sixteen bodies at
// their 32 MiB default limit or thousands of ordinary prompts (a
// long-context prompt is a few hundred KiB of JSON).
const DefaultBodyBytesInFlight = 512 << 20

// Grow returns a copy of buf with capacity next, the growth taken from the
// budget first, and the bytes taken; ok is false, buf returned as it was
// and nothing taken, when the budget has no room. next must not be below
// cap(buf).
func (b *Budget) Grow(buf []byte, next int) (grown []byte, taken int64, ok bool) {
	taken = int64(next - cap(buf))
	if !b.Acquire(taken) {
		return buf, 0, false
	}
	grown = make([]byte, len(buf), next)
	copy(grown, buf)
	return grown, taken, true
}
