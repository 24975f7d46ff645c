package render

import (
	"math"
	"strconv"
	"strings"
)

// MaxTokens returns the output-token cap a request body asks for: its
// top-level max_completion_tokens (the Chat Completions API's current
// name), else max_tokens (Completions, Chat Completions, Anthropic
// Messages), else max_output_tokens (Responses); of duplicate keys the
// last, as a JSON decoder keeps it. A null counts as absent, as in vLLM
// ({"max_completion_tokens":null,"max_tokens":100} caps the answer at
// 100); the first of the three present and not null decides. Its value is
// read as vLLM's request models read an int (pydantic's lax mode): an
// integer, a float with no fractional part (100.0, 1e2), a string of an
// integer (" +1_000 ", "100.00") or true (1). ok is false when the body is
// not a JSON object or that one is not such a positive integer (2.5, "1e2",
// 0; vLLM refuses the request or it asks for nothing), or none is there:
// the engine then caps the answer at the context's rest, and a caller uses
// its own estimate. The body is scanned, not decoded: nested values are
// skipped.
func MaxTokens(body []byte) (n int64, ok bool) {
	f, err := scanTop(body)
	if err != nil {
		return 0, false
	}
	for _, spans := range [][]span{f.maxCompletionTokens, f.maxTokens, f.maxOutputTokens} {
		if len(spans) == 0 {
			continue
		}
		v := spans[len(spans)-1]
		if string(body[v.start:v.end]) == "null" {
			continue
		}
		x, ok := laxInt(body[v.start:v.end])
		if !ok || x <= 0 {
			return 0, false
		}
		return x, true
	}
	return 0, false
}

// laxInt reads raw, one JSON value that scanTop validated, as pydantic's
// lax mode reads an int: a JSON integer; a JSON float (Python's
// json.loads makes one of any fraction or exponent) that is finite and
// integral; a string, once its escapes are decoded and its surrounding
// white space stripped, of an optional sign and decimal digits with single
// underscores between them, then optionally a '.' and zeros only; true
// and false as 1 and 0. ok is false for anything else and for a value
// outside int64 (pydantic takes Python's unbounded ints; no cap that large
// is one a caller can use).
func laxInt(raw []byte) (int64, bool) {
	switch c := raw[0]; {
	case c == 't':
		return 1, true
	case c == 'f':
		return 0, true
	case c == '"':
		s, err := unquote(raw)
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
	// 2^63 is the first float64 past int64: a float below it converts
	// exactly.
	if err != nil || x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
		return 0, false
	}
	return int64(x), true
}

// laxIntString reads s, stripped, as pydantic reads a string for an int
// (see laxInt).
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
