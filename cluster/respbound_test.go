package cluster

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// refBound is the reference of respBound: a recursive parser of a whole
// stream, giving what go-redis is to read of it and why it stops, by the
// same rules, written without the incremental machinery (no state carried
// across reads).
type refBound struct {
	in      []byte
	pos     int
	out     []byte
	lim     respLimits
	reply   int64
	reason  int // -1: not refused
	strings int // bulk strings replaced by ""
}

func refRun(in []byte, lim respLimits) *refBound {
	p := &refBound{in: in, lim: lim, reason: -1}
	for p.pos < len(p.in) {
		p.reply = 0
		if !p.value(0) {
			break
		}
	}
	return p
}

func (p *refBound) refuse(reason int) bool { p.reason = reason; return false }

func (p *refBound) emit(b []byte) { p.out = append(p.out, b...); p.reply += int64(len(b)) }

// value parses one value inside d aggregates; false when the stream ends or
// is refused.
func (p *refBound) value(d int) bool {
	if p.pos >= len(p.in) {
		return false
	}
	rest := p.in[p.pos:]
	switch rest[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		allowed := min(p.lim.maxString, p.lim.maxReply-p.reply)
		end := bytes.IndexByte(rest, '\n')
		n := int64(end + 1)
		if end < 0 {
			n = int64(len(rest))
		}
		if n > allowed {
			p.emit(rest[:allowed])
			if allowed == p.lim.maxString {
				return p.refuse(refuseLong)
			}
			return p.refuse(refuseReply)
		}
		p.emit(rest[:n])
		p.pos += int(n)
		return end >= 0
	case '$', '!', '=', '*', '~', '>', '%', '|':
	default:
		return p.refuse(refuseMalformed)
	}
	end := bytes.IndexByte(rest, '\n')
	if end < 0 || end+1 > maxHeader {
		if len(rest) > maxHeader {
			return p.refuse(refuseMalformed)
		}
		return false
	}
	h := rest[:end+1]
	if len(h) < 4 || h[len(h)-2] != '\r' {
		return p.refuse(refuseMalformed)
	}
	typ, digits := h[0], string(h[1:len(h)-2])
	null := digits == "-1"
	var n int64
	if !null {
		if len(digits) > 18 || digits[0] == '+' || digits[0] == '-' {
			return p.refuse(refuseMalformed)
		}
		v, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			return p.refuse(refuseMalformed)
		}
		n = v
	}
	p.pos += len(h)
	switch typ {
	case '$', '!', '=':
		switch {
		case null && typ != '$':
			return p.refuse(refuseMalformed)
		case n > p.lim.maxString && typ == '$':
			if p.reply+6 > p.lim.maxReply {
				return p.refuse(refuseReply)
			}
			p.strings++
			if int64(len(p.in)-p.pos) < n+2 {
				p.pos = len(p.in)
				return false
			}
			p.emit([]byte("$0\r\n\r\n"))
			p.pos += int(n + 2)
			return true
		case n > p.lim.maxString:
			return p.refuse(refuseLong)
		case null:
			p.emit(h)
			return true
		case p.reply+int64(len(h))+n+2 > p.lim.maxReply:
			return p.refuse(refuseReply)
		}
		p.emit(h)
		payload := p.in[p.pos:min(len(p.in), p.pos+int(n+2))]
		p.emit(payload)
		p.pos += len(payload)
		return int64(len(payload)) == n+2
	}
	if null && typ != '*' {
		return p.refuse(refuseMalformed)
	}
	elems := n
	if typ == '%' || typ == '|' {
		elems = 2 * n
	}
	switch {
	case elems > p.lim.maxElems:
		return p.refuse(refuseElements)
	case d == p.lim.maxDepth && elems > 0:
		return p.refuse(refuseDepth)
	case p.reply+int64(len(h)) > p.lim.maxReply:
		return p.refuse(refuseReply)
	}
	p.emit(h)
	for range elems {
		if !p.value(d + 1) {
			return false
		}
	}
	if typ == '|' { // the attributed value follows
		return p.value(d)
	}
	return true
}

// chunkConn serves its chunks, one per Read (split further to fit p), then
// io.EOF.
type chunkConn struct {
	net.Conn
	chunks [][]byte
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// throughBound reads in through a respConn of lim, the socket's reads cut
// by sizes and go-redis's reads sized by sizes too (cycled), and returns
// what came out, the reasons counted and the final error.
func throughBound(in []byte, lim respLimits, sizes []byte) ([]byte, []int, error) {
	size := func(i int) int {
		if len(sizes) == 0 {
			return 1 << 20
		}
		return 1 + int(sizes[i%len(sizes)])
	}
	cc := &chunkConn{}
	for i, rest := 0, in; len(rest) > 0; i++ {
		k := min(size(i), len(rest))
		cc.chunks = append(cc.chunks, rest[:k])
		rest = rest[k:]
	}
	var reasons []int
	conn := wrapConn(cc, lim, func(r int) { reasons = append(reasons, r) })
	var out []byte
	for i := 0; ; i++ {
		buf := make([]byte, size(i+7))
		n, err := conn.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, reasons, err
		}
	}
}

// checkBound compares a respConn with the reference on in.
func checkBound(t *testing.T, in []byte, lim respLimits, sizes []byte) {
	t.Helper()
	ref := refRun(in, lim)
	out, reasons, err := throughBound(in, lim, sizes)
	require.Equal(t, string(ref.out), string(out), "what go-redis reads of %q", in)
	var want []int
	for range ref.strings {
		want = append(want, refuseString)
	}
	if ref.reason >= 0 {
		want = append(want, ref.reason)
		require.ErrorIs(t, err, errReplyRefused)
	} else {
		require.ErrorIs(t, err, io.EOF)
	}
	require.Equal(t, want, reasons, "refusals of %q", in)
}

var smallLimits = respLimits{maxString: 20, maxElems: 4, maxDepth: 3, maxReply: 80}

// validRESP is a stream of every RESP2/RESP3 type kvroute's connections
// may read: what a bounder of generous limits passes byte for byte.
const validRESP = "+OK\r\n-ERR wrong\r\n:42\r\n_\r\n,3.14\r\n#t\r\n(12345678901234567890\r\n" +
	"$5\r\nhello\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n!3\r\nbad\r\n=8\r\ntxt:abcd\r\n" +
	"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\n\r\n\n\r\r\n" +
	">4\r\n$8\r\nsmessage\r\n$2\r\nch\r\n$1\r\nx\r\n:1\r\n" +
	"%2\r\n+a\r\n:1\r\n+b\r\n*2\r\n~1\r\n:1\r\n%0\r\n" +
	"|1\r\n+ttl\r\n:3\r\n$2\r\nok\r\n" +
	"*2\r\n|0\r\n:1\r\n*1\r\n*1\r\n*0\r\n"

// A valid stream passes byte for byte whatever its cuts: every socket read
// and every read of go-redis of 1 to 31 bytes.
func TestRespBoundPassesValidStreams(t *testing.T) {
	big := respLimits{maxString: 1 << 20, maxElems: 1 << 16, maxDepth: maxRESPDepth, maxReply: 1 << 30}
	for cut := 1; cut < 32; cut++ {
		out, reasons, err := throughBound([]byte(validRESP), big, []byte{byte(cut - 1)})
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, validRESP, string(out), "cut %d", cut)
		require.Empty(t, reasons)
		checkBound(t, []byte(validRESP), big, []byte{byte(cut - 1)})
	}
}

// Each bound refuses exactly what exceeds it, by its reason; an oversized
// bulk string reads as "" and the stream goes on.
func TestRespBoundRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		in     string
		out    string
		reason int // -1: not refused
	}{
		"string at the bound": {"$20\r\n01234567890123456789\r\n:1\r\n", "$20\r\n01234567890123456789\r\n:1\r\n", -1},
		"string over it":      {"*2\r\n$21\r\n012345678901234567890\r\n:1\r\n", "*2\r\n$0\r\n\r\n:1\r\n", -1},
		"huge string":         {"$536870912\r\nabc", "", -1},
		"blob error over":     {"!21\r\n", "", refuseLong},
		"verbatim over":       {"=21\r\n", "", refuseLong},
		"line over":           {"+0123456789012345678901\r\n", "+0123456789012345678", refuseLong},
		"array at the bound":  {"*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", "*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", -1},
		"array over":          {"*5\r\n:1\r\n", "", refuseElements},
		"huge array":          {"*2147483648\r\n", "", refuseElements},
		"map over":            {"%3\r\n", "", refuseElements},
		"depth at the bound":  {"*1\r\n*1\r\n*1\r\n:1\r\n", "*1\r\n*1\r\n*1\r\n:1\r\n", -1},
		"depth over":          {"*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", "*1\r\n*1\r\n*1\r\n", refuseDepth},
		"reply over":          {"*3\r\n$20\r\n01234567890123456789\r\n$20\r\n01234567890123456789\r\n$20\r\n", "*3\r\n$20\r\n01234567890123456789\r\n$20\r\n01234567890123456789\r\n", refuseReply},
		"unknown type":        {":1\r\n?", ":1\r\n", refuseMalformed},
		"bad length":          {"$1x\r\n", "", refuseMalformed},
		"no CR":               {"$1\n", "", refuseMalformed},
		"endless header":      {"*111111111111111111111111111", "", refuseMalformed},
		"null map":            {"%-1\r\n", "", refuseMalformed},
	} {
		t.Run(name, func(t *testing.T) {
			for cut := 1; cut <= len(tc.in); cut++ {
				out, reasons, err := throughBound([]byte(tc.in), smallLimits, []byte{byte(cut - 1)})
				require.Equal(t, tc.out, string(out))
				if tc.reason < 0 {
					require.ErrorIs(t, err, io.EOF)
					require.NotContains(t, reasons, refuseLong)
				} else {
					require.ErrorIs(t, err, errReplyRefused)
					require.Equal(t, tc.reason, reasons[len(reasons)-1])
				}
				checkBound(t, []byte(tc.in), smallLimits, []byte{byte(cut - 1)})
			}
		})
	}
}

// A refused connection keeps failing: go-redis must not read on past the
// refusal.
func TestRespBoundRefusalSticks(t *testing.T) {
	conn := wrapConn(&chunkConn{chunks: [][]byte{[]byte("*5\r\n:1\r\n:2\r\n")}}, smallLimits, nil)
	for range 3 {
		n, err := conn.Read(make([]byte, 64))
		require.Zero(t, n)
		require.True(t, errors.Is(err, errReplyRefused), "%v", err)
	}
}

// FuzzRespBound compares respConn with the reference on any stream, cut at
// any socket and go-redis read boundaries: what go-redis reads and what is
// refused must be the same.
func FuzzRespBound(f *testing.F) {
	f.Add([]byte(validRESP), []byte{0, 3, 17})
	f.Add([]byte("*2\r\n$21\r\n012345678901234567890\r\n:1\r\n"), []byte{4})
	f.Add([]byte("*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"), []byte{1})
	f.Add([]byte("|1\r\n+a\r\n+b\r\n%1\r\n+c\r\n:1\r\n"), []byte{2, 9})
	f.Fuzz(func(t *testing.T, in, sizes []byte) {
		checkBound(t, in, smallLimits, sizes)
	})
}
