package recent

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// Size is how many records a Ring keeps: what one status page lists.
const Size = 16

// Ring holds the latest Size records added to it. The zero value is an
// empty ring ready to use; Add and List may be called from any goroutine
// (mu guards ring and n).
type Ring[T any] struct {
	mu   sync.Mutex
	ring [Size]T
	n    int // records ever added
}

// Add records v, replacing the oldest record once Size are held.
func (r *Ring[T]) Add(v T) {
	r.mu.Lock()
	r.ring[r.n%Size] = v
	r.n++
	r.mu.Unlock()
}

// List returns a copy of the records held, newest first.
func (r *Ring[T]) List() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := min(r.n, Size)
	out := make([]T, 0, k)
	for i := 1; i <= k; i++ {
		out = append(out, r.ring[(r.n-i)%Size])
	}
	return out
}

// Added returns how many records were ever added: unlike len(List()), it
// keeps counting once the ring is full, so that a caller can wait for a
// particular record to be added.
func (r *Ring[T]) Added() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// MaxText bounds each text a record keeps from a client or a peer (a
// request ID, a model name, a path): records stay until newer ones replace
// them, and a model name may be as long as a request body, so without the
// bound Size records could hold Size bodies' worth of memory.
const MaxText = 256

// Clip returns s cut to MaxText bytes at a UTF-8 boundary, as a copy that
// keeps none of s's memory, and whether it was cut. A caller counts the
// cuts in its own metric.
func Clip(s string) (string, bool) {
	if len(s) <= MaxText {
		return s, false
	}
	n := MaxText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n]), true
}
