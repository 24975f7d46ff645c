package jsonids

import (
	"errors"
)

// errNotList is Parse's error for a value that is not null or an array.
var errNotList = errors.New("not a list of token IDs")

// Parse decodes b, one JSON value with optional whitespace around it, as
// encoding/json decodes it into a []uint32, and accepts what that accepts
// but for a null element: null is nil, an array of integers from 0 to
// 4294967295 (no sign, fraction or exponent) its IDs (an empty array an
// empty, non-nil slice), anything else an error. encoding/json reads a
// null element as 0; vLLM and SGLang refuse a list of token IDs holding
// one, and so does Parse. The slice is sized by counting commas
// first (List): one allocation, where encoding/json's reflective decoder
// grows it as it goes and spends most of a 2,000-token body's time per
// element.
func Parse(b []byte) ([]uint32, error) {
	i := skipSpace(b, 0)
	if len(b)-i >= 4 && string(b[i:i+4]) == "null" {
		if skipSpace(b, i+4) != len(b) {
			return nil, errNotList
		}
		return nil, nil
	}
	if i == len(b) || b[i] != '[' {
		return nil, errNotList
	}
	ids, next, _, err := List(nil, b, i)
	if err != nil {
		return nil, err
	}
	if skipSpace(b, next) != len(b) {
		return nil, errNotList
	}
	if ids == nil {
		ids = []uint32{} // "[]": empty, not null
	}
	return ids, nil
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
