package cluster

import (
	"errors"
	"fmt"
	"net"
)

// A replica's Redis connections pass every byte they read through a
// respBound before go-redis parses it: the bounder follows the RESP2/RESP3
// stream as it goes by, payloads included but never buffered, and stops at
// a length header announcing more than kvroute could ever have written,
// before go-redis allocates what it announces. go-redis reads a bulk string,
// an array or a line whole into memory, whatever length the server
// announces (up to Redis's proto-max-bulk-len, 512 MiB by default), and
// only then does this package see it.
//
//   - A bulk string ($) longer than maxString reaches go-redis as the empty
//     string once its bytes have been discarded as they arrived: a peer's record or
//     decision message that large is refused as an undecodable one is, and
//     the rest of the reply (the other peers' records) and the connection
//     are kept.
//   - Anything else over a bound fails the connection's reads with
//     errReplyRefused: a blob error or verbatim string over maxString, a line
//     (simple string, error, number) over maxString, an aggregate (array,
//     set, push, map, attribute) of more than maxElems elements or nested
//     deeper than maxDepth, a reply over maxReply bytes in all, or bytes that
//     are no RESP. go-redis drops the connection and dials another (a
//     subscription resubscribes on its next receive), and the command fails.
//
// Every refusal is counted by reason (refuse*).
var errReplyRefused = errors.New("cluster: Redis reply refused")

// Reasons a reply is refused, the reason label of
// kvroute_cluster_redis_replies_refused_total.
const (
	refuseString    = iota // a bulk string over maxString, replaced by ""
	refuseLong             // another string or line over maxString
	refuseElements         // an aggregate over maxElems
	refuseDepth            // aggregates nested over maxDepth
	refuseReply            // a reply over maxReply bytes
	refuseMalformed        // no RESP
	numRefusals
)

var refuseNames = [numRefusals]string{"string_too_long", "line_too_long", "too_many_elements", "nested_too_deep", "reply_too_large", "malformed"}

// respLimits are the bounds of what one connection reads (see limitsFor).
type respLimits struct {
	maxString int64 // bytes of one string or line
	maxElems  int64 // elements of one aggregate (a map's pairs count twice)
	maxDepth  int   // aggregates nested in one another
	maxReply  int64 // bytes of one top-level reply, as go-redis receives it
}

const (
	// maxRESPDepth bounds the nesting of aggregates: COMMAND, which go-redis
	// sends to a Redis Cluster, nests 8 deep (subcommands' key specs).
	maxRESPDepth = 16
	// maxHeader is the longest length header: a type byte, 20 digits, CRLF.
	maxHeader = 24
	// readChunk is the most a respConn reads from the socket at once.
	readChunk = 16 << 10
)

// Parser states.
const (
	stType    = iota // at the first byte of a value
	stLine           // inside a line, passed through up to its '\n'
	stHeader         // inside a length header, held back up to its '\n'
	stPayload        // inside a string's payload and its CRLF, passed through
	stSkip           // inside a refused bulk string's payload, discarded; "" at its end
)

type respFrame struct {
	left int64 // elements still to come
	attr bool  // an attribute: when complete, its parent still awaits a value
}

// respBound is the incremental RESP parser of one connection.
type respBound struct {
	lim    respLimits
	refuse func(reason int) // counts a refusal; may be nil

	st     int
	hdr    [maxHeader]byte
	hn     int
	remain int64 // payload bytes (CRLF included) to pass or skip
	lineN  int64 // bytes of the current line so far
	stack  [maxRESPDepth]respFrame
	depth  int
	reply  int64 // bytes passed of the current top-level reply
	err    error
}

func (b *respBound) fail(reason int, format string, args ...any) error {
	b.err = fmt.Errorf("%w: %s", errReplyRefused, fmt.Sprintf(format, args...))
	if b.refuse != nil {
		b.refuse(reason)
	}
	return b.err
}

// feed parses in, writes what go-redis is to read to out and returns how
// much of each it used. It stops when in is consumed, out is full (a held
// header needs maxHeader bytes of room) or a bound is exceeded (err, which
// every later call returns too).
func (b *respBound) feed(in, out []byte) (nin, nout int, err error) {
	for nin < len(in) && b.err == nil {
		switch b.st {
		case stType:
			if nout == len(out) {
				return nin, nout, nil
			}
			switch c := in[nin]; c {
			case '$', '!', '=', '*', '~', '>', '%', '|':
				b.st, b.hdr[0], b.hn = stHeader, c, 1
				nin++
			case '+', '-', ':', '_', ',', '#', '(':
				b.st, b.lineN = stLine, 0
			default:
				return nin, nout, b.fail(refuseMalformed, "byte %q where a value starts", c)
			}
		case stLine:
			room := min(int64(len(in)-nin), int64(len(out)-nout), b.lim.maxString-b.lineN, b.lim.maxReply-b.reply)
			if room <= 0 {
				if nout == len(out) {
					return nin, nout, nil
				}
				if b.lineN >= b.lim.maxString {
					return nin, nout, b.fail(refuseLong, "line over %d bytes", b.lim.maxString)
				}
				return nin, nout, b.fail(refuseReply, "reply over %d bytes", b.lim.maxReply)
			}
			chunk := in[nin : nin+int(room)]
			end := len(chunk)
			for i, c := range chunk {
				if c == '\n' {
					end = i + 1
					break
				}
			}
			copy(out[nout:], chunk[:end])
			nin, nout = nin+end, nout+end
			b.lineN += int64(end)
			b.reply += int64(end)
			if chunk[end-1] == '\n' {
				b.st = stType
				b.valueDone()
			}
		case stHeader:
			c := in[nin]
			if b.hn == maxHeader {
				return nin, nout, b.fail(refuseMalformed, "length header over %d bytes", maxHeader)
			}
			if c != '\n' {
				b.hdr[b.hn] = c
				b.hn++
				nin++
				continue
			}
			if len(out)-nout < maxHeader {
				return nin, nout, nil // the header goes out whole or not at all
			}
			b.hdr[b.hn] = c
			b.hn++
			nin++
			nout += b.header(out[nout:])
		case stPayload:
			k := min(int64(len(in)-nin), int64(len(out)-nout), b.remain)
			if k == 0 {
				return nin, nout, nil
			}
			copy(out[nout:], in[nin:nin+int(k)])
			nin, nout = nin+int(k), nout+int(k)
			b.remain -= k
			if b.remain == 0 {
				b.st = stType
				b.valueDone()
			}
		case stSkip:
			k := min(int64(len(in)-nin), b.remain-1)
			nin += int(k)
			b.remain -= k
			if b.remain > 1 || nin == len(in) {
				continue
			}
			if len(out)-nout < maxHeader {
				return nin, nout, nil // the empty string goes out whole or not at all
			}
			// The string's last byte: only now does go-redis get the empty
			// string, so that it never takes the reply for complete (and the
			// connection for idle) with the string's bytes still to come.
			nin++
			nout += copy(out[nout:], "$0\r\n\r\n")
			b.st, b.remain = stType, 0
			b.valueDone()
		}
	}
	return nin, nout, b.err
}

// header acts on the complete length header in b.hdr[:b.hn] and writes
// what go-redis gets of it to out (at least maxHeader bytes of room).
func (b *respBound) header(out []byte) int {
	h := b.hdr[:b.hn]
	if len(h) < 4 || h[len(h)-2] != '\r' {
		b.fail(refuseMalformed, "length header %q", h)
		return 0
	}
	typ, digits := h[0], h[1:len(h)-2]
	var n int64
	null := string(digits) == "-1"
	if !null {
		if len(digits) > 18 {
			b.fail(refuseMalformed, "length header %q", h)
			return 0
		}
		for _, d := range digits {
			if d < '0' || d > '9' {
				b.fail(refuseMalformed, "length header %q", h)
				return 0
			}
			n = 10*n + int64(d-'0')
		}
	}
	aggregate := typ != '$' && typ != '!' && typ != '='
	if null && (aggregate && typ != '*' || !aggregate && typ != '$') {
		b.fail(refuseMalformed, "length header %q", h)
		return 0
	}
	if !aggregate {
		switch {
		case n > b.lim.maxString && typ == '$':
			if b.reply+6 > b.lim.maxReply {
				b.fail(refuseReply, "reply over %d bytes", b.lim.maxReply)
				return 0
			}
			if b.refuse != nil {
				b.refuse(refuseString)
			}
			b.st, b.remain = stSkip, n+2
			b.reply += 6 // the empty string that replaces it, at its end
			return 0
		case n > b.lim.maxString:
			b.fail(refuseLong, "string of %d bytes over %d", n, b.lim.maxString)
			return 0
		case b.reply+int64(len(h))+n+2 > b.lim.maxReply && !null:
			b.fail(refuseReply, "reply over %d bytes", b.lim.maxReply)
			return 0
		}
		b.reply += int64(len(h))
		if null {
			b.st = stType
			b.valueDone()
		} else {
			b.st, b.remain = stPayload, n+2
			b.reply += n + 2 // its payload, passed in stPayload
		}
		return copy(out, h)
	}
	elems := n
	if typ == '%' || typ == '|' {
		elems = 2 * n
	}
	switch {
	case elems > b.lim.maxElems:
		b.fail(refuseElements, "aggregate of %d elements over %d", elems, b.lim.maxElems)
		return 0
	case b.depth == b.lim.maxDepth && elems > 0:
		b.fail(refuseDepth, "aggregates nested over %d deep", b.lim.maxDepth)
		return 0
	case b.reply+int64(len(h)) > b.lim.maxReply:
		b.fail(refuseReply, "reply over %d bytes", b.lim.maxReply)
		return 0
	}
	b.reply += int64(len(h))
	b.st = stType
	switch {
	case elems > 0:
		b.stack[b.depth] = respFrame{left: elems, attr: typ == '|'}
		b.depth++
	case typ != '|': // an empty attribute is no value
		b.valueDone()
	}
	return copy(out, h)
}

// valueDone ends a value: it counts it in its aggregate, ending those it
// completes, and starts a new reply after a top-level value.
func (b *respBound) valueDone() {
	for b.depth > 0 {
		top := &b.stack[b.depth-1]
		top.left--
		if top.left > 0 {
			return
		}
		b.depth--
		if top.attr {
			return // the attributed value follows
		}
	}
	b.reply = 0
}

// respConn is a Redis connection whose reads pass through a respBound.
// It keeps net.Conn's other methods, and the socket's syscall.Conn (go-redis
// peeks at an idle pooled connection's socket to tell a dead one, which
// consumes nothing).
type respConn struct {
	net.Conn
	b       respBound
	buf     []byte // bytes read from the socket
	in      []byte // the part of buf not yet parsed
	small   [maxHeader]byte
	pending []byte // parsed bytes for go-redis that did not fit its buffer
	rerr    error  // the socket's error, returned once in is parsed
}

func (c *respConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if len(c.pending) > 0 {
			n := copy(p, c.pending)
			c.pending = c.pending[n:]
			return n, nil
		}
		if c.b.err != nil {
			return 0, c.b.err
		}
		if len(c.in) > 0 {
			out := p
			if len(p) < maxHeader {
				out = c.small[:]
			}
			nin, nout, err := c.b.feed(c.in, out)
			c.in = c.in[nin:]
			if len(p) < maxHeader {
				c.pending = c.small[:nout]
				nout = 0
			}
			if nout > 0 || err != nil && len(c.pending) == 0 {
				return nout, err
			}
			if len(c.pending) > 0 {
				continue
			}
		}
		if len(c.in) > 0 { // fed nothing out: a held header waits for room, which p now has
			continue
		}
		if c.rerr != nil {
			err := c.rerr
			c.rerr = nil
			return 0, err
		}
		if c.buf == nil {
			c.buf = make([]byte, readChunk)
		}
		n, err := c.Conn.Read(c.buf)
		c.in, c.rerr = c.buf[:n], err
		if n == 0 && err == nil {
			return 0, nil
		}
	}
}
