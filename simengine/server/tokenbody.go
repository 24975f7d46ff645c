package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"

	"github.com/kvroute/kvroute/internal/jsonexact"
	"github.com/kvroute/kvroute/internal/jsonids"
	"github.com/kvroute/kvroute/internal/jsonscan"
)

// Token-ID bodies without reflection. A router that tokenizes once sends
// completions with the prompt as a list of token IDs and reads the render
// routes' token_ids: on a 2,000-token prompt that is about 12 KB of digits
// each way, which encoding/json scans twice and decodes or encodes one
// reflected element at a time, costing the simulated engine more than its
// own tokenizer does on the same prompt's text (and more than the rest of a
// fast simulated request). A real engine's cost is the reverse (tokenizing
// dominates), so these two paths keep the simulation's costs in that order
// while answering byte for byte as encoding/json would.

// maxBodyDepth bounds the nesting decodeCompletion's key walk follows.
const maxBodyDepth = 512

// decodeCompletion decodes a completions body exactly as decodeJSON would.
// When the body is one JSON object whose only "prompt" key (by its exact
// name, as decodeFrom reads members) holds a list of token IDs, the list is
// parsed directly (into req.ids, req.Prompt keeping its bytes) and only the
// rest of the body goes through jsonexact; any other body, and any body the
// fast path does not accept, is decoded by decodeFrom over the same bytes
// (and read error) as decodeJSON, so errors are unchanged.
func (s *Server) decodeCompletion(w http.ResponseWriter, r *http.Request, req *completionRequest) *apiError {
	if e := checkJSONType(r); e != nil {
		return e
	}
	body, readErr := readBody(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), r.ContentLength, s.cfg.MaxBodyBytes)
	if readErr == nil {
		if vs, ve, ids, ok := tokenPrompt(body); ok {
			if e := checkStreamOptions(req, body); e != nil {
				return e // as decodeFrom checks it, before the fields' types
			}
			rest := make([]byte, 0, len(body)-(ve-vs)+len("null"))
			rest = append(append(append(rest, body[:vs]...), "null"...), body[ve:]...)
			if jsonexact.Unmarshal(rest, req) == nil {
				req.Prompt, req.ids = body[vs:ve], ids
				return checkSalt(req)
			}
			*req = completionRequest{}
		}
	}
	var src io.Reader = bytes.NewReader(body)
	if readErr != nil {
		src = io.MultiReader(src, errReader{readErr})
	}
	return s.decodeFrom(src, req)
}

// errReader returns err on every read: a body's read error replayed after
// its bytes.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// readBody reads a whole body, sized by its Content-Length when that is
// known and within limit (one allocation instead of io.ReadAll's doublings).
func readBody(body io.Reader, contentLength, limit int64) ([]byte, error) {
	if contentLength <= 0 || contentLength > limit {
		return io.ReadAll(body)
	}
	buf := make([]byte, 0, contentLength+1) // +1: room to see EOF without growing
	for {
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 512)
		}
	}
}

// tokenPrompt finds, in a body that is one JSON object followed by nothing
// but whitespace, the value of its "prompt" key, and parses it when it is a
// list of token IDs: its span [vs, ve) and the IDs. ok is false when the
// body is not such an object, when the prompt is anything else, when no key
// or more than one key is "prompt", when a key is a case variant of it, or
// when any key is escaped or not ASCII (each left to decodeFrom).
func tokenPrompt(body []byte) (vs, ve int, ids []uint32, ok bool) {
	sc := jsonscan.Scanner{Buf: body}
	sc.WS()
	if !sc.Consume('{') {
		return 0, 0, nil, false
	}
	found := false
	sc.WS()
	if sc.Consume('}') {
		return 0, 0, nil, false
	}
	for {
		sc.WS()
		ks := sc.Pos
		esc, err := sc.SkipString()
		if err != nil || esc {
			return 0, 0, nil, false
		}
		key := body[ks+1 : sc.Pos-1]
		for _, c := range key {
			if c >= 0x80 {
				return 0, 0, nil, false
			}
		}
		sc.WS()
		if !sc.Consume(':') {
			return 0, 0, nil, false
		}
		sc.WS()
		if !bytes.Equal(key, []byte("prompt")) && bytes.EqualFold(key, []byte("prompt")) {
			return 0, 0, nil, false // a case variant: left to decodeFrom
		}
		if bytes.Equal(key, []byte("prompt")) {
			// A token list holds no bracket but its own: it ends at the
			// next ']', and parseTokenList checks every byte before it.
			end := bytes.IndexByte(body[sc.Pos:], ']')
			if found || sc.Peek() != '[' || end < 0 || !parseTokenList(body[sc.Pos:sc.Pos+end+1], &ids) {
				return 0, 0, nil, false
			}
			found, vs, ve = true, sc.Pos, sc.Pos+end+1
			sc.Pos = ve
		} else if err := sc.SkipValue(2, maxBodyDepth, math.MaxInt); err != nil {
			return 0, 0, nil, false
		}
		sc.WS()
		if sc.Consume(',') {
			continue
		}
		if !sc.Consume('}') {
			return 0, 0, nil, false
		}
		sc.WS()
		return vs, ve, ids, found && sc.Pos == len(body)
	}
}

// marshalRender encodes render responses (one GenerateRequest, or the
// completions route's array of them) as json.Marshal does, writing each
// token_ids array with jsonids instead of encoding/json's reflected slice
// encoder: every other field goes through json.Marshal with token_ids nil,
// and the array replaces its "null".
func marshalRender(gs []generateRequest, array bool) ([]byte, error) {
	var out []byte
	if array {
		out = append(out, '[')
	}
	for i := range gs {
		if i > 0 {
			out = append(out, ',')
		}
		g := gs[i]
		ids := g.TokenIDs
		g.TokenIDs = nil
		b, err := json.Marshal(g)
		if err != nil {
			return nil, err
		}
		// request_id, the only field before token_ids, is a JSON string,
		// whose encoding has no unescaped quote: the first match is the field.
		at := bytes.Index(b, []byte(`,"token_ids":null,`))
		if at < 0 {
			return nil, errors.New("render response: no token_ids field")
		}
		at += len(`,"token_ids":`)
		if ids == nil {
			out = append(out, b...)
			continue
		}
		out = slices.Grow(out, len(b)-len("null")+jsonids.Len(ids))
		out = append(out, b[:at]...)
		out = jsonids.Append(out, ids)
		out = append(out, b[at+len("null"):]...)
	}
	if array {
		out = append(out, ']')
	}
	return out, nil
}

// writeRender writes render responses with marshalRender, as writeJSON
// would write them.
func writeRender(w http.ResponseWriter, gs []generateRequest, array bool) {
	b, err := marshalRender(gs, array)
	status := http.StatusOK
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding failed","type":"InternalServerError","param":null,"code":500}}`)
	}
	writeBody(w, status, b)
}
