package jsonids

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute/internal/jsonscan"
)

// LaxInt reads raw, one valid JSON value, as pydantic's lax mode reads an
// int (how vLLM's request models read max_tokens or a token ID): a JSON
// integer; a JSON float (Python's json.loads makes one of any fraction or
// exponent) that is finite and integral; a string, once its escapes are
// decoded and its surrounding white space stripped, of an optional sign
// and decimal digits with single underscores between them, then
// optionally a '.' and zeros only; true and false as 1 and 0. ok is false
// for anything else (null, 2.5, "1e2", "10.") and for a value outside
// int64 (pydantic takes Python's unbounded ints; none that large is one a
// caller here can use).
func LaxInt(raw []byte) (int64, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	switch c := raw[0]; {
	case c == 't':
		return 1, string(raw) == "true"
	case c == 'f':
		return 0, string(raw) == "false"
	case c == '"':
		s, err := jsonscan.Unquote(raw)
		if err != nil {
			return 0, false
		}
		return laxIntString(strings.TrimSpace(s))
	case c == '-' || '0' <= c && c <= '9':
	default:
		return 0, false
	}
	lit := string(raw)
	if !strings.ContainsAny(lit, ".eE") {
		x, err := strconv.ParseInt(lit, 10, 64)
		return x, err == nil
	}
	x, err := strconv.ParseFloat(lit, 64)
	// 2^63 is the first float64 past int64: one below it converts exactly.
	if err != nil || x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
		return 0, false
	}
	return int64(x), true
}

// laxIntString reads s, stripped, as pydantic reads a string for an int
// (see LaxInt).
func laxIntString(s string) (int64, bool) {
	if whole, frac, ok := strings.Cut(s, "."); ok {
		if frac == "" || strings.Trim(frac, "0") != "" {
			return 0, false
		}
		s = whole
	}
	sign := ""
	if s != "" && (s[0] == '+' || s[0] == '-') {
		sign, s = s[:1], s[1:]
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return 0, false
	}
	digits := strings.ReplaceAll(s, "_", "")
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	x, err := strconv.ParseInt(sign+digits, 10, 64)
	return x, err == nil
}

// ParseLax is Parse reading each ID as vLLM's request models read a
// list[int] (pydantic's lax mode, LaxInt): 1.0, 1e2 and "7" are the IDs
// 1, 100 and 7, true is 1. A null, a fraction, a value past uint32 and
// anything not a list are refused, as Parse refuses them. A list Parse
// reads is read by Parse; only one it refuses is decoded again, slowly.
func ParseLax(b []byte) ([]uint32, error) {
	ids, err := Parse(b)
	if err == nil {
		return ids, nil
	}
	var elems []json.RawMessage
	if json.Unmarshal(b, &elems) != nil || elems == nil {
		return nil, err
	}
	ids = make([]uint32, len(elems))
	for i, e := range elems {
		x, ok := LaxInt(e)
		if !ok || x < 0 || x > math.MaxUint32 {
			return nil, &ListError{Index: i, At: -1}
		}
		ids[i] = uint32(x)
	}
	return ids, nil
}
