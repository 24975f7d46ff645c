package stallwrite

import (
	"errors"
	"net/http"
	"os"
	"time"
)

// Writer writes a response with a write deadline of D restarted before
// every write. The deadline is a socket deadline, so wall time. Use it from
// the handler's goroutine only.
type Writer struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
	on bool // w supports write deadlines
}

// Start arms the deadline on w's connection (before the header is
// written, which the first Write or Flush sends) and returns the Writer.
// A ResponseWriter without write deadlines (not net/http's server) is
// written without one. Call Stop when the response is over.
func Start(w http.ResponseWriter, d time.Duration) Writer {
	rc := http.NewResponseController(w)
	return Writer{w: w, rc: rc, d: d, on: rc.SetWriteDeadline(time.Now().Add(d)) == nil}
}

// Write restarts the deadline and writes p.
func (s Writer) Write(p []byte) (int, error) {
	if s.on {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.d))
	}
	return s.w.Write(p)
}

// Flush sends what is buffered to the client, under the deadline of the
// last Write (or of Start); http.ErrNotSupported when w cannot flush.
func (s Writer) Flush() error { return s.rc.Flush() }

// Stop clears the deadline, so that the next request on a keep-alive
// connection starts without it.
func (s Writer) Stop() {
	if s.on {
		_ = s.rc.SetWriteDeadline(time.Time{})
	}
}

// Stalled reports whether err, from Write or Flush, is the deadline: the
// client took nothing for D.
func Stalled(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
