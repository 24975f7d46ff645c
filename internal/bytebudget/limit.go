package bytebudget

import (
	"io"
	"math"
)

// LimitPastCap returns a reader of at most limit bytes of r plus one: a
// read that returns more than limit bytes tells the caller that the body
// exceeds its cap. At the largest limit (math.MaxInt64, no practical cap)
// there is no byte past it; limit+1 would wrap to a negative count, and
// io.LimitReader would read nothing at all.
func LimitPastCap(r io.Reader, limit int64) io.Reader {
	return io.LimitReader(r, limit+min(1, math.MaxInt64-limit))
}
