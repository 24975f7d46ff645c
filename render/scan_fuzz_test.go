package render

import (
	"encoding/json"
	"strings"
	"testing"
)

// scanValid reports whether the scanner accepts in as one JSON value, and
// whether it refused only for nesting beyond maxDepth (which encoding/json
// allows far deeper).
func scanValid(in []byte) (ok, tooDeep bool) {
	s := scanner{b: in}
	s.ws()
	err := s.skipValue(0)
	if err == nil {
		err = s.trailer()
	}
	return err == nil, err != nil && strings.Contains(err.Error(), "nesting deeper")
}

// FuzzScannerMatchesEncodingJSON holds the hand-written scanner to
// encoding/json's notion of a valid document: it accepts exactly what
// json.Valid accepts (nesting beyond maxDepth aside), so a render response or
// request body the scanner skips through is one a JSON parser would read.
func FuzzScannerMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"token_ids":[1,2,3],"features":null,"cache_salt":"s"}`,
		`[{"a":"\u00e9\n\"q\"","b":[true,false,null,-0.5e+3]}]`,
		`"\ud800"`, "\"\xff\"", "\"a\x01b\"", `"\x"`, `"\u12g4"`, `01`, `-`, `1.`, `1e`, `[1,]`, `{"a" 1}`,
		` 7 `, `{}`, `[]`, `tru`, `nul`, `"\/"`, "\"long string with a tab\t in the middle of it\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ok, tooDeep := scanValid(in)
		if tooDeep {
			return
		}
		if want := json.Valid(in); ok != want {
			t.Fatalf("scanner accepts %q: %v, encoding/json: %v", in, ok, want)
		}
	})
}

func TestScannerValidatesStrings(t *testing.T) {
	for in, want := range map[string]bool{
		`"plain"`: true, `"esc \" \\ \/ \b \f \n \r \t \u00E9"`: true, "\"\xff\xfe\"": true, `"\udc00"`: true,
		"\"a\x1fb\"": false, "\"0123456789\x00abcdef\"": false, `"\a"`: false, `"\u00"`: false, `"\u00zz"`: false,
		`"\`: false, `"abc`: false,
	} {
		ok, _ := scanValid([]byte(in))
		if ok != want || json.Valid([]byte(in)) != want {
			t.Errorf("%q: scanner %v, encoding/json %v, want %v", in, ok, json.Valid([]byte(in)), want)
		}
	}
}
