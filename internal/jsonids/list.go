package jsonids

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// ListError is List's error: the array is not one (Index < 0: no '[' at
// the start, or no ']' after it), or the ID at Index is not an integer from
// 0 to 4294967295, or is not followed by ',' or ']'. At is the offset in b
// where reading stopped.
type ListError struct {
	Index int
	At    int
}

// Error says which ID was wrong, or that there was no array.
func (e *ListError) Error() string {
	if e.Index < 0 {
		return "not an array of token IDs"
	}
	return fmt.Sprintf("token ID %d: not an integer from 0 to 4294967295", e.Index)
}

// List reads the JSON array of token IDs that starts at b[i] (its '['),
// with JSON whitespace allowed around every element, appending the IDs to
// dst, which grows at most once, to exactly the array's length. It returns
// the IDs, the index just after the array's ']', and whether the array had
// no whitespace at all, in which case its bytes are exactly what Append
// writes for the IDs (Number refuses signs, fractions, exponents and
// leading zeros). A list of token IDs holds no bracket but its own, so the
// array ends at the first ']' after b[i]: the IDs are counted, and the
// slice sized, from the commas before it. On an error the IDs read so far
// are returned with a *ListError.
func List(dst []uint32, b []byte, i int) (ids []uint32, next int, compact bool, err error) {
	if i >= len(b) || b[i] != '[' {
		return dst, i, false, &ListError{Index: -1, At: i}
	}
	end := bytes.IndexByte(b[i:], ']')
	if end < 0 {
		return dst, len(b), false, &ListError{Index: -1, At: len(b)}
	}
	end += i
	first := i
	i = skipSpace(b[:end], i+1)
	if i == end {
		return dst, end + 1, end == first+1, nil
	}
	if n := bytes.Count(b[i:end], []byte{','}) + 1; cap(dst)-len(dst) < n {
		grown := make([]uint32, len(dst), len(dst)+n)
		copy(grown, dst)
		dst = grown
	}
	base := len(dst)
	digits := 0 // of every ID: with the commas and brackets, the compact length
	for {
		// The common case inline: an ID of up to seven digits and its comma
		// within one loaded word, which also says where the next ID
		// starts, without reading b[i] again.
		read := false
		if end-i >= 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			if n := leadingDigits(x); n > 0 && n < 8 && (n == 1 || byte(x) != '0') {
				dst = append(dst, uint32(eightDigits(x<<(64-8*n))))
				digits += n
				if byte(x>>(8*n)) == ',' {
					i += n + 1
					continue
				}
				i, read = i+n, true
			}
		}
		if !read { // whitespace first, eight digits or more, or the last bytes
			at := skipSpace(b[:end], i)
			v, next, ok := Number(b[:end], at)
			if !ok {
				return dst, at, false, &ListError{Index: len(dst) - base, At: at}
			}
			dst = append(dst, v)
			digits += next - at
			i = next
		}
		// After an ID: whitespace, then ',' or the array's end.
		i = skipSpace(b[:end], i)
		if i == end {
			return dst, end + 1, end-first == digits+len(dst)-base, nil
		}
		if b[i] != ',' {
			return dst, i, false, &ListError{Index: len(dst) - base - 1, At: i}
		}
		i++
	}
}
