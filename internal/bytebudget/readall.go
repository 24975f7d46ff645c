package bytebudget

import (
	"errors"
	"io"
)

// ErrNoRoom is returned by ReadAll when the budget has no room for the
// body's next buffer.
var ErrNoRoom = errors.New("bytebudget: the budget of bytes in flight is exhausted")

// The first buffer of ReadAll: what a body of known length takes at most
// before any byte arrives (a client that announces a large length and
// sends a few bytes gets this much and no more), and the first buffer of a
// body of unknown length.
const (
	readStartKnown   = 64 << 10
	readStartUnknown = 8 << 10
)

// ReadAll reads rd to its end into a buffer whose every growth is charged
// to b first. size is the length the body announces (-1 when unknown) and
// limit the most it may have; rd must itself refuse bytes past limit (as
// http.MaxBytesReader does), and a body of known size is never given a
// buffer beyond size. Buffers grow by doubling as bytes arrive, so a body
// costs at most twice its size in allocations and holds of b no more than
// twice what has arrived. held is what the body holds of b when ReadAll
// returns, also on error; the caller releases it once done with the body.
// A body longer than its announced size is refused with ErrTooLong.
func (b *Budget) ReadAll(rd io.Reader, size, limit int64) (body []byte, held int64, err error) {
	want, start := limit, int64(readStartUnknown)
	if size >= 0 {
		want, start = min(size, limit), readStartKnown
	}
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			if int64(cap(buf)) >= want {
				// The buffer holds all the body may have: only its end
				// (or rd's error past its limit) can follow.
				var probe [1]byte
				n, err := rd.Read(probe[:])
				switch {
				case n > 0:
					return nil, held, ErrTooLong
				case err == io.EOF:
					return nonNil(buf), held, nil
				case err != nil:
					return nil, held, err
				}
				continue
			}
			next := min(max(2*int64(cap(buf)), start), want)
			grown, taken, ok := b.Grow(buf, int(next))
			if !ok {
				return nil, held, ErrNoRoom
			}
			buf, held = grown, held+taken
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return nonNil(buf), held, nil
		case err != nil:
			return nil, held, err
		}
	}
}

// ErrTooLong is returned by ReadAll for a body with more bytes than its
// announced size or its limit.
var ErrTooLong = errors.New("bytebudget: the body is longer than its announced size or its limit")

// nonNil returns b, or an empty slice for nil: a nil body means "no body".
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
