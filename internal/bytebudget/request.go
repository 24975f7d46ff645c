package bytebudget

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// ReadRequest reads r's body whole, at most limit bytes, with ReadAll into
// buffers charged to b, under a read deadline of timeout on the client's
// connection: the request-body reading the kvroute gateway and the P/D
// sidecar share. A body over limit, announced or sent, is an
// *http.MaxBytesError (one announced over limit is read to the limit and
// not kept, so that the client is answered 413 as net/http answers it);
// ErrNoRoom means b had no room. held is what the body holds of b, also on
// error; the caller releases it once done with the body. The deadline is
// cleared after a complete body, so that it does not cut the response
// (net/http reads the connection while the handler runs, to notice a
// client going away); after a failed read it stays, bounding what net/http
// discards afterwards. A ResponseWriter without read deadlines (not
// net/http's server) reads without one.
func (b *Budget) ReadRequest(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) (body []byte, held int64, err error) {
	rc := http.NewResponseController(w)
	// A socket deadline, handed to the OS: wall time.
	timed := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	rd := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength > limit {
		if _, err := io.Copy(io.Discard, rd); err != nil {
			return nil, 0, err
		}
		return nil, 0, &http.MaxBytesError{Limit: limit} // the body ended short of its Content-Length
	}
	body, held, err = b.ReadAll(rd, r.ContentLength, limit)
	if errors.Is(err, ErrTooLong) {
		err = &http.MaxBytesError{Limit: limit} // more than Content-Length: net/http prevents it
	}
	if err == nil && timed {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, held, err
}
