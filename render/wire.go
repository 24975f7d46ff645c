package render

import (
	"io"
)

// maxInlineParts is how many parts a wireBody holds without a slice of its
// own: the unedited body is one, max_tokens and the return_mm_kwargs splice
// make five.
const maxInlineParts = 7

// wireBody is a request body as it goes on the wire: the concatenation of
// its parts, which point into the caller's body or at constant literals and
// are never modified. It lets the render copy of a body differ from the
// body without copying the prompt.
type wireBody struct {
	inline [maxInlineParts][]byte
	more   [][]byte // parts beyond the inline ones
	n      int      // parts in inline
	size   int64
}

// wholeBody is b unedited.
func wholeBody(b []byte) wireBody {
	var w wireBody
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

// reader returns a reader of the whole body; each call starts at the
// beginning (GetBody, for the transport's retries).
func (w *wireBody) reader() io.ReadCloser { return &wireReader{w: w} }

// wireReader reads a wireBody's parts in order.
type wireReader struct {
	w   *wireBody
	i   int // current part
	off int // offset in it
}

func (r *wireReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		part, ok := r.w.part(r.i)
		if !ok {
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		c := copy(p[n:], part[r.off:])
		n += c
		r.off += c
		if r.off == len(part) {
			r.i, r.off = r.i+1, 0
		}
	}
	return n, nil
}

// WriteTo writes the remaining parts to w.
func (r *wireReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		part, ok := r.w.part(r.i)
		if !ok {
			return total, nil
		}
		n, err := w.Write(part[r.off:])
		total += int64(n)
		if err != nil {
			r.off += n
			return total, err
		}
		r.i, r.off = r.i+1, 0
	}
}

// Close does nothing: the parts belong to the caller.
func (r *wireReader) Close() error { return nil }
