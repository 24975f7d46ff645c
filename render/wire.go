package render

// maxInlineParts is how many parts a wireBody holds without a slice of its
// own: the unedited body is one, max_tokens and the return_mm_kwargs splice
// make five.
const maxInlineParts = 7

// wireBody is a request body as the concatenation of its parts, which point
// into the caller's body or at constant literals and are never modified. An
// unedited body is sent as the caller's slice itself; an edited one is
// joined once (flat).
type wireBody struct {
	inline [maxInlineParts][]byte
	more   [][]byte // parts beyond the inline ones
	n      int      // parts in inline
	size   int64
	joined []byte // flat's result, once asked for
	model  string // the request's model: only endpoints serving it render it ("" = any)
	// keepJSON: the answer's prompts keep the renderer's token_ids bytes
	// (Request.KeepTokenJSON).
	keepJSON bool
	// prompts is the most prompts a completions answer may hold: the
	// request's (topFields.prompts).
	prompts int
	// probe marks a mode-discovery probe: it takes a slot like a render
	// but is counted in none of the render metrics (Client.metricsFor).
	probe bool
}

// wholeBody is b unedited, a body of one prompt.
func wholeBody(b []byte) wireBody {
	w := wireBody{prompts: 1}
	w.add(b)
	return w
}

func (w *wireBody) add(p []byte) {
	if len(p) == 0 {
		return
	}
	w.size += int64(len(p))
	if w.n < maxInlineParts {
		w.inline[w.n] = p
		w.n++
		return
	}
	w.more = append(w.more, p)
}

// part returns the i-th part; ok is false past the last one.
func (w *wireBody) part(i int) ([]byte, bool) {
	if i < w.n {
		return w.inline[i], true
	}
	if i-w.n < len(w.more) {
		return w.more[i-w.n], true
	}
	return nil, false
}

// bytes returns the body as one slice: the single part itself when there is
// one, else a copy.
func (w *wireBody) bytes() []byte {
	if w.n == 1 && len(w.more) == 0 {
		return w.inline[0]
	}
	out := make([]byte, 0, w.size)
	for i := 0; ; i++ {
		p, ok := w.part(i)
		if !ok {
			return out
		}
		out = append(out, p...)
	}
}

// flat returns the body as one slice, joining the parts at most once (the
// same slice for a retry).
// An unedited body is never written to, so one wireBody of it may be sent
// from several goroutines (Check).
func (w *wireBody) flat() []byte {
	if w.n == 1 && len(w.more) == 0 {
		return w.inline[0]
	}
	if w.joined == nil {
		w.joined = w.bytes()
	}
	return w.joined
}
