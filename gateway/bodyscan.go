package gateway

import (
	"encoding/json"
	"errors"
	"math"
	"unicode/utf8"

	"github.com/kvroute/kvroute/internal/jsonscan"
)

// errNotObject is returned by bodyModel for a body that is not a JSON
// object.
var errNotObject = errors.New("not a JSON object")

// maxScanDepth bounds the nesting bodyModel follows, so that a hostile body
// cannot exhaust the stack.
const maxScanDepth = 512

// bodyModel validates body as one JSON object and returns its top-level
// "model" member ("" when absent or null; the last one when repeated). It is
// the only field the gateway reads, and a prompt of thousands of tokens made
// encoding/json (validation pass plus decode) a fifth of the gateway's own
// CPU per request; this is one pass that builds no values. It accepts
// exactly what encoding/json accepts as an object (invalid UTF-8 included),
// except that the key must be "model" exactly, as the engines read it, not
// a case-insensitive match. The lexical work is internal/jsonscan's (shared
// with the render client); its errors say "invalid JSON at offset N: ...".
// Only objects and arrays count toward maxScanDepth.
func bodyModel(body []byte) (string, error) {
	model, _, err := scanBody(body)
	return model, err
}

// transferKey is vLLM's kv_transfer_params member, quoted as a key.
const transferKey = `"kv_transfer_params"`

// scanBody is bodyModel, also reporting whether the body has a top-level
// kv_transfer_params member (its name matched as vLLM matches it, escapes
// decoded), found in the same pass.
func scanBody(body []byte) (model string, transfer bool, err error) {
	s := jsonscan.Scanner{Buf: body}
	s.WS()
	if !s.Consume('{') {
		return "", false, errNotObject
	}
	s.WS()
	if !s.Consume('}') {
		for {
			s.WS()
			ks := s.Pos
			esc, err := s.SkipString()
			if err != nil {
				return "", false, err
			}
			ke := s.Pos
			isModel := string(body[ks:ke]) == `"model"`
			transfer = transfer || string(body[ks:ke]) == transferKey
			if esc {
				var k string
				ok := json.Unmarshal(body[ks:ke], &k) == nil
				isModel = ok && k == "model"
				transfer = transfer || ok && k == transferKey[1:len(transferKey)-1]
			}
			s.WS()
			if !s.Consume(':') {
				return "", false, s.Errorf("expected ':'")
			}
			s.WS()
			vs := s.Pos
			escaped := false
			if isModel && s.Pos < len(body) && body[s.Pos] == '"' {
				escaped, err = s.SkipString() // the scan says whether it holds escapes
			} else {
				err = s.SkipValue(2, maxScanDepth, math.MaxInt)
			}
			if err != nil {
				return "", false, err
			}
			if isModel {
				switch v := body[vs:s.Pos]; v[0] {
				case '"':
					// A plain name (no escapes, valid UTF-8) is its bytes;
					// only others go through the decoder.
					if in := v[1 : len(v)-1]; !escaped && utf8.Valid(in) {
						model = string(in)
					} else if err := json.Unmarshal(v, &model); err != nil {
						return "", false, err
					}
				case 'n':
					model = ""
				default:
					return "", false, s.Errorf("model must be a string")
				}
			}
			s.WS()
			if s.Consume(',') {
				continue
			}
			if s.Consume('}') {
				break
			}
			return "", false, s.Errorf("expected ',' or '}'")
		}
	}
	s.WS()
	if s.Pos != len(body) {
		return "", false, s.Errorf("data after the JSON object")
	}
	return model, transfer, nil
}
