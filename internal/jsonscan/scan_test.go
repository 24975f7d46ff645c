package jsonscan

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// valid reports whether in is one JSON value (whitespace around it allowed)
// by the Scanner, and whether a refusal was for depth.
func valid(in []byte, maxDepth, maxLeaf int) (ok, tooDeep bool, err error) {
	s := Scanner{Buf: in}
	s.WS()
	err = s.SkipValue(1, maxDepth, maxLeaf)
	if err == nil {
		s.WS()
		if s.Pos != len(in) {
			err = s.Errorf("data after the JSON value")
		}
	}
	return err == nil, err != nil && strings.Contains(err.Error(), "nesting deeper"), err
}

func TestSkipValueAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`0`, `-0`, `-0.5e+3`, `1E9`, `12.25`, `01`, `-`, `1.`, `1e`, `1e+`, `.5`, `+1`, `-a`,
		`true`, `false`, `null`, `tru`, `nul`, `nulll`, `True`,
		`""`, `"a\"b\\c\/\b\f\n\r\t\u00e9"`, `"\x"`, `"\u12g4"`, "\"a\x01b\"", "\"\xff\"", `"\ud800"`, `"abc`,
		`{}`, `[]`, `{"a":1}`, `{"a" 1}`, `{"a":}`, `{a:1}`, `{"a":1,}`, `[1,]`, `[,1]`, `[1 2]`, `{"a":1 "b":2}`,
		` [ 1 , { "b" : [ ] } ] `, `[`, `{`, `{"a"`, `{"a":`, ``, ` `, `1 2`, `[]]`, "\x00",
	} {
		ok, deep, err := valid([]byte(in), 64, 64)
		require.False(t, deep, in)
		require.Equal(t, json.Valid([]byte(in)), ok, "%q: %v", in, err)
		if err != nil {
			var se *SyntaxError
			require.ErrorAs(t, err, &se, in)
			require.ErrorIs(t, err, ErrSyntax, in)
			require.True(t, se.Offset >= 0 && se.Offset <= len(in), "%q: offset %d", in, se.Offset)
		}
	}
}

func TestSkipValueErrorsNameTheOffset(t *testing.T) {
	for in, want := range map[string]string{
		`[1,]`:        "invalid JSON at offset 3: unexpected character ']'",
		`[1`:          "invalid JSON at offset 2: expected ',' or ']'",
		`{"a":tru}`:   "invalid JSON at offset 5: invalid literal",
		`{"a":1.}`:    "invalid JSON at offset 7: invalid number",
		`{"a" 1}`:     "invalid JSON at offset 5: expected ':'",
		`{"a":1 2}`:   "invalid JSON at offset 7: expected ',' or '}'",
		`{1:2}`:       "invalid JSON at offset 1: expected a string",
		`["a\x"]`:     `invalid JSON at offset 3: invalid string escape`,
		`[`:           "invalid JSON at offset 1: unexpected end",
		"[\"a\x01\"]": "invalid JSON at offset 3: control character in string",
	} {
		_, _, err := valid([]byte(in), 64, 64)
		require.EqualError(t, err, want, in)
	}
}

// The two limits: maxDepth bounds objects and arrays, maxLeafDepth every
// value.
func TestSkipValueDepthLimits(t *testing.T) {
	nest := func(n int, inner string) []byte {
		return []byte(strings.Repeat("[", n) + inner + strings.Repeat("]", n))
	}
	// Brackets only (maxLeafDepth unbounded): n arrays are fine up to
	// maxDepth, whatever they hold.
	for _, inner := range []string{"", "1", `"s"`} {
		ok, _, err := valid(nest(8, inner), 8, math.MaxInt)
		require.True(t, ok, "%q: %v", inner, err)
		ok, deep, _ := valid(nest(9, inner), 8, math.MaxInt)
		require.False(t, ok)
		require.True(t, deep)
	}
	// Every value: eight empty arrays are fine, a value in the eighth is not.
	ok, _, err := valid(nest(8, ""), 8, 8)
	require.True(t, ok, err)
	_, deep, err := valid(nest(8, "1"), 8, 8)
	require.True(t, deep, err)
	require.EqualError(t, err, "invalid JSON at offset 8: nesting deeper than 8")
	_, _, err = valid(nest(9, ""), 8, math.MaxInt)
	require.EqualError(t, err, "invalid JSON at offset 8: nesting deeper than 8")
	// A hostile depth is refused without exhausting the stack.
	_, deep, _ = valid(nest(1<<20, ""), 512, math.MaxInt)
	require.True(t, deep)
}

func TestLexicalPieces(t *testing.T) {
	s := Scanner{Buf: []byte(" \t\r\n x")}
	s.WS()
	require.Equal(t, 5, s.Pos)
	require.Equal(t, byte('x'), s.Peek())
	require.False(t, s.Consume('y'))
	require.True(t, s.Consume('x'))
	require.Equal(t, byte(0), s.Peek())
	require.False(t, s.Consume('x'))
	s.WS() // at the end: stays
	require.Equal(t, 6, s.Pos)

	s = Scanner{Buf: []byte("nul")}
	require.False(t, s.Literal("null"))
	require.Equal(t, 0, s.Pos)
	s = Scanner{Buf: []byte("null,")}
	require.True(t, s.Literal("null"))
	require.Equal(t, 4, s.Pos)

	s = Scanner{Buf: []byte("0123x")}
	require.Equal(t, 4, s.Digits())
	require.Equal(t, 0, s.Digits())

	s = Scanner{Buf: []byte(`"a\nb" "c`)}
	end, esc, err := s.StringEnd()
	require.NoError(t, err)
	require.Equal(t, 6, end)
	require.True(t, esc)
	require.Equal(t, 0, s.Pos, "StringEnd does not move")
	esc, err = s.SkipString()
	require.NoError(t, err)
	require.True(t, esc)
	require.Equal(t, 6, s.Pos)
	s.WS()
	_, err = s.SkipString()
	require.EqualError(t, err, "invalid JSON at offset 9: unterminated string")
	require.Equal(t, 7, s.Pos, "an error leaves Pos")

	for in, end := range map[string]int{`0`: 1, `-12.5e-3,`: 8, `0x`: 1, `1E+9]`: 4} {
		s = Scanner{Buf: []byte(in)}
		require.NoError(t, s.SkipNumber(), in)
		require.Equal(t, end, s.Pos, in)
	}
	for in, at := range map[string]int{`-`: 1, `1.`: 2, `1e`: 2, `1e-`: 3, `x`: 0, `.1`: 0} {
		s = Scanner{Buf: []byte(in)}
		err := s.SkipNumber()
		var se *SyntaxError
		require.True(t, errors.As(err, &se), in)
		require.Equal(t, at, se.Offset, in)
		require.Equal(t, "invalid number", se.Msg, in)
	}

	v, err := Unquote([]byte(`"caf\u00e9 \"x\""`))
	require.NoError(t, err)
	require.Equal(t, `café "x"`, v)
	v, err = Unquote([]byte("\"a\xffb\""))
	require.NoError(t, err)
	require.Equal(t, "a\ufffdb", v)
	_, err = Unquote([]byte(`"a\x"`))
	require.Error(t, err)
}

// The Scanner is a slice and an int, so that a caller that keeps one on the
// heap (the render client does) pays for no more, and skipping a valid value
// allocates nothing.
func TestScannerIsSmallAndSkipAllocatesNothing(t *testing.T) {
	require.Equal(t, uintptr(32), unsafe.Sizeof(Scanner{}))
	require.Zero(t, testing.AllocsPerRun(100, func() {
		s := Scanner{Buf: []byte(`[1,"a",{"b":null}]`)}
		if s.SkipValue(1, 8, 8) != nil {
			t.Fatal("rejected")
		}
	}))
}
