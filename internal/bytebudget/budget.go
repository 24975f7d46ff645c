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
