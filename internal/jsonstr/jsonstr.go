package jsonstr

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// Error is a string that is not valid JSON: what is wrong and the offset of
// the offending byte in the scanned slice.
type Error struct {
	Offset int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// The problems StringEnd reports.
const (
	MsgNotString    = "expected a string"
	MsgUnterminated = "unterminated string"
	MsgControl      = "control character in string"
	MsgEscape       = "invalid string escape"
	MsgUnicode      = `invalid \u escape`
)

// Word masks: every byte 0x01, 0x20, '"', '\\', and every byte's top bit.
const (
	ones  = 0x0101010101010101
	ctl   = 0x2020202020202020
	quote = 0x2222222222222222
	bslsh = 0x5c5c5c5c5c5c5c5c
	high  = 0x8080808080808080
)

// special returns a mask with the top bit set in the byte lanes of x that
// are '"', '\\' or below 0x20 (and possibly in lanes above the first such
// lane, through borrows; the lowest set lane is always exact, which is all
// StringEnd reads). A lane at or above 0x80 is never flagged: (v - k) &^ v
// keeps a borrow-free top bit only when v's own top bit is clear.
func special(x uint64) uint64 {
	q := x ^ quote
	b := x ^ bslsh
	return ((q-ones)&^q | (b-ones)&^b | (x-ctl)&^x) & high
}

// denseRun is how many plain bytes after an escape StringEnd reads one by
// one before it goes back to words: escapes in code and chat transcripts
// come a few bytes apart, where a table look-up per byte beats word tests.
const denseRun = 16

// isSpecial marks the bytes a string scan stops at.
var isSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// StringEnd scans the JSON string whose opening quote is b[start] and
// returns the index just past its closing quote and whether it holds
// escapes. It accepts what encoding/json accepts: escapes are one of
// \" \\ \/ \b \f \n \r \t or \u with four hex digits, no byte below 0x20
// appears unescaped, and invalid UTF-8 and lone surrogate escapes pass.
//
// After an escape it reads the next bytes one by one (a table look-up each),
// since where escapes are dense the next one is a few bytes away; after
// denseRun plain bytes it tests eight bytes as one word, and past a plain
// word it switches to memchr (bytes.IndexByte) for the next quote and
// the next backslash, and checks the bytes before them for control bytes a
// word at a time; the positions found are kept until the scan passes them,
// so no byte is searched twice and escape-dense strings stay linear.
func StringEnd(b []byte, start int) (end int, escaped bool, err *Error) {
	if start >= len(b) || b[start] != '"' {
		return 0, false, &Error{start, MsgNotString}
	}
	i := start + 1
	nq, nb := -1, -1 // the next quote and backslash at or after i, when >= i
	dense := false   // an escape was just read: look at the next bytes one by one
	for {
		if dense {
			lim := min(i+denseRun, len(b))
			for i < lim && !isSpecial[b[i]] {
				i++
			}
			if i == lim {
				if i == len(b) {
					return 0, false, &Error{len(b), MsgUnterminated}
				}
				dense = false // a plain run: back to words
				continue
			}
		} else if i+8 <= len(b) {
			if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
			} else {
				i += 8
				if nq < i {
					q := bytes.IndexByte(b[i:], '"')
					if q < 0 {
						return 0, false, &Error{len(b), MsgUnterminated}
					}
					nq = i + q
				}
				if nb < i {
					if x := bytes.IndexByte(b[i:nq], '\\'); x >= 0 {
						nb = i + x
					} else {
						nb = len(b) // none before the quote
					}
				}
				stop := min(nq, nb)
				if c := controlAt(b[i:stop]); c >= 0 {
					return 0, false, &Error{i + c, MsgControl}
				}
				i = stop
			}
		} else {
			for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
				i++
			}
			if i >= len(b) {
				return 0, false, &Error{len(b), MsgUnterminated}
			}
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, nil
		case c < 0x20:
			return 0, false, &Error{i, MsgControl}
		}
		// A backslash.
		escaped, dense = true, true
		if i+1 >= len(b) {
			return 0, false, &Error{len(b), MsgUnterminated}
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
				return 0, false, &Error{i, MsgUnicode}
			}
			i += 6
		default:
			return 0, false, &Error{i, MsgEscape}
		}
	}
}

// controlAt returns the index of the first byte below 0x20 in b, or -1,
// eight bytes per word, four words per step (a byte x < 0x20 is one whose
// x - 0x20 borrows while x has its top bit clear).
func controlAt(b []byte) int {
	rest := b
	for len(rest) >= 32 {
		x0 := binary.LittleEndian.Uint64(rest)
		x1 := binary.LittleEndian.Uint64(rest[8:])
		x2 := binary.LittleEndian.Uint64(rest[16:])
		x3 := binary.LittleEndian.Uint64(rest[24:])
		if ((x0-ctl)&^x0|(x1-ctl)&^x1|(x2-ctl)&^x2|(x3-ctl)&^x3)&high != 0 {
			break
		}
		rest = rest[32:]
	}
	off := len(b) - len(rest)
	for len(rest) >= 8 {
		x := binary.LittleEndian.Uint64(rest)
		if m := (x - ctl) &^ x & high; m != 0 {
			return off + bits.TrailingZeros64(m)>>3
		}
		rest = rest[8:]
		off += 8
	}
	for k, c := range rest {
		if c < 0x20 {
			return off + k
		}
	}
	return -1
}

func isHex4(h []byte) bool {
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
