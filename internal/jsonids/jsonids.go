package jsonids

// digitPairs holds "00", "01", ... "99": two digits per division by 100.
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// digits returns the number of decimal digits of v.
func digits(v uint32) int {
	switch {
	case v < 10:
		return 1
	case v < 100:
		return 2
	case v < 1000:
		return 3
	case v < 10000:
		return 4
	case v < 100000:
		return 5
	case v < 1000000:
		return 6
	case v < 10000000:
		return 7
	case v < 100000000:
		return 8
	case v < 1000000000:
		return 9
	}
	return 10
}

// Len returns the length of the JSON array Append writes for ids: the
// brackets, the commas and every ID's decimal digits.
func Len(ids []uint32) int {
	n := 2
	if len(ids) > 0 {
		n += len(ids) - 1
	}
	for _, v := range ids {
		n += digits(v)
	}
	return n
}

// Append appends ids to dst as a JSON array of integers, "[]" when ids is
// empty, and returns the extended slice. It grows dst at most once, to
// exactly the length Len reports.
func Append(dst []byte, ids []uint32) []byte {
	n := len(dst)
	size := Len(ids)
	if cap(dst)-n < size {
		grown := make([]byte, n, n+size)
		copy(grown, dst)
		dst = grown
	}
	b := dst[n : n+size]
	b[0] = '['
	p := 1
	for i, v := range ids {
		if i > 0 {
			b[p] = ','
			p++
		}
		p += digits(v)
		q := p
		for v >= 100 {
			r := v % 100
			v /= 100
			q -= 2
			b[q], b[q+1] = digitPairs[2*r], digitPairs[2*r+1]
		}
		if v >= 10 {
			b[q-2], b[q-1] = digitPairs[2*v], digitPairs[2*v+1]
		} else {
			b[q-1] = byte('0' + v)
		}
	}
	b[p] = ']'
	return dst[:n+size]
}
