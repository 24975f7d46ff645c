package jsonscan

// PythonJSON returns body as vLLM and SGLang read a request body: FastAPI
// hands the body's bytes to Python's json.loads, which decodes a UTF-16 or
// UTF-32 body (detected as DetectWide says) and reads a UTF-8 one past one
// leading byte order mark. Every reader of a client body in kvroute (the
// gateway, the ext_proc picker, the routing sidecar, the simulated engine)
// reads it through this function, so that they accept the same bodies and
// answer the same ones as the engine does.
//
// A UTF-8 body is returned without its mark (TrimBOM), sharing body's
// array; reserve is not called. A wide body is returned as the UTF-8 JSON
// it encodes, in a new array of exactly the size UTF8Len gives: reserve,
// when not nil, is called with that size before the array is made, so
// that a caller charges the copy to its memory budget first, and an error
// of reserve is returned as is, nothing copied. A wide body that is not
// text in its encoding is UTF8Len's error, which names the encoding;
// reserve is then not called.
func PythonJSON(body []byte, reserve func(n int) error) ([]byte, error) {
	w, ok := DetectWide(body)
	if !ok {
		return TrimBOM(body), nil
	}
	n, err := w.UTF8Len(body)
	if err != nil {
		return nil, err
	}
	if reserve != nil {
		if err := reserve(n); err != nil {
			return nil, err
		}
	}
	return w.AppendUTF8(make([]byte, 0, n), body), nil
}
