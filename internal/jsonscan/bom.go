package jsonscan

import "bytes"

// bom is the UTF-8 byte order mark.
var bom = []byte{0xEF, 0xBB, 0xBF}

// TrimBOM returns body without one leading UTF-8 byte order mark, as vLLM
// and SGLang read a request body: FastAPI hands the body's bytes to
// Python's json.loads, which decodes bytes that start with the mark as
// UTF-8-sig, the mark dropped. Only one mark at the very start goes (a
// second, or one after whitespace, is still no JSON for json.loads). The
// result shares body's array.
func TrimBOM(body []byte) []byte {
	if bytes.HasPrefix(body, bom) {
		return body[len(bom):]
	}
	return body
}
