package kvindex

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
)

// Sizes of the pieces a section body is read into: the first is
// snapPieceMin bytes, each next one twice the one before, up to
// snapPieceMax.
const (
	snapPieceMin = 64 << 10
	snapPieceMax = 1 << 20
)

// sectionBuf holds one section body, read in pieces that are allocated as
// the bytes arrive and never copied or grown. A section of N bytes costs N
// bytes plus less than one piece (at most snapPieceMax), however its bytes
// arrive, where a growing contiguous buffer costs up to 3 N while it
// doubles; a forged length on a short input costs what arrived plus one
// piece. The pieces are kept for the next section of the same snapshot.
type sectionBuf struct {
	pieces [][]byte // allocated pieces, each at its full size
	body   [][]byte // the current body: a prefix of each of the first pieces
	max    int      // largest piece (0: snapPieceMax); tests set tiny pieces
	// version is the snapshot's format version: whether sections end
	// with the groups part.
	version int
}

// pieceSize returns the size of piece i.
func (b *sectionBuf) pieceSize(i int) int {
	limit := b.max
	if limit <= 0 {
		limit = snapPieceMax
	}
	size := min(snapPieceMin, limit)
	for ; i > 0 && size < limit; i-- {
		size *= 2
	}
	return min(size, limit)
}

// read reads a body of n bytes from r into the pieces, feeding it to d as
// it arrives. It returns the bytes read and the reader's error, with
// io.EOF when r ends before n bytes.
func (b *sectionBuf) read(r io.Reader, n int64, d *xxhash.Digest) (int64, error) {
	b.body = b.body[:0]
	var got int64
	for i := 0; got < n; i++ {
		if i == len(b.pieces) {
			b.pieces = append(b.pieces, make([]byte, b.pieceSize(i)))
		}
		p := b.pieces[i][:min(int64(len(b.pieces[i])), n-got)]
		k, err := io.ReadFull(r, p)
		_, _ = d.Write(p[:k])
		got += int64(k)
		b.body = append(b.body, p[:k])
		if err != nil {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			return got, err
		}
	}
	return got, nil
}

// cursor returns a cursor at the start of the body.
func (b *sectionBuf) cursor() *secCursor {
	c := &secCursor{rest: b.body}
	for _, p := range b.body {
		c.left += len(p)
	}
	c.next()
	return c
}

// secCursor reads a section body held in pieces; the first error sticks.
// A value that spans two pieces is copied into tmp, so a slice returned by
// bytes is valid only until the cursor's next call.
type secCursor struct {
	b    []byte   // unread bytes of the current piece
	rest [][]byte // the pieces after it
	left int      // unread bytes in all
	tmp  []byte
	err  error
}

// next moves to the next non-empty piece when the current one is read.
func (c *secCursor) next() {
	for len(c.b) == 0 && len(c.rest) > 0 {
		c.b, c.rest = c.rest[0], c.rest[1:]
	}
}

// take consumes n ≤ c.left bytes and returns them, copied into c.tmp when
// they span pieces.
func (c *secCursor) take(n int) []byte {
	c.left -= n
	if len(c.b) >= n {
		p := c.b[:n]
		c.b = c.b[n:]
		c.next()
		return p
	}
	if cap(c.tmp) < n {
		c.tmp = make([]byte, n)
	}
	p := c.tmp[:n]
	for k := 0; k < n; {
		m := copy(p[k:], c.b)
		k += m
		c.b = c.b[m:]
		c.next()
	}
	return p
}

func (c *secCursor) failf(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{ErrSnapshotMalformed}, args...)...)
	}
}

func (c *secCursor) uvarint(what string, max uint64) uint64 {
	if c.err != nil {
		return 0
	}
	v, n := binary.Uvarint(c.b)
	if n == 0 && len(c.b) < c.left { // cut by the end of a piece
		var buf [binary.MaxVarintLen64]byte
		k := copy(buf[:], c.b)
		for _, p := range c.rest {
			if k == len(buf) {
				break
			}
			k += copy(buf[k:], p)
		}
		v, n = binary.Uvarint(buf[:k])
	}
	if n <= 0 {
		c.failf("%s: bad varint", what)
		return 0
	}
	c.take(n)
	if v > max {
		c.failf("%s %d exceeds %d", what, v, max)
		return 0
	}
	return v
}

func (c *secCursor) bytes(what string, n uint64) []byte {
	if c.err != nil {
		return nil
	}
	if uint64(c.left) < n {
		c.failf("%s: %d bytes, %d left", what, n, c.left)
		return nil
	}
	return c.take(int(n))
}

func (c *secCursor) u64(what string) uint64 {
	p := c.bytes(what, 8)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(p)
}

func (c *secCursor) u8(what string) byte {
	p := c.bytes(what, 1)
	if p == nil {
		return 0
	}
	return p[0]
}
