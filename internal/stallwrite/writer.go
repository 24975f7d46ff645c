package stallwrite

import (
	"errors"
	"net/http"
	"os"
	"time"
)

// Writer writes a response with a write deadline of D restarted before
// every write, and, when started with StartFloor, under a floor rate too.
// The deadline is a socket deadline, so wall time; the floor runs on its
// own clock and is checked before every write. Use it from the handler's
// goroutine only.
type Writer struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	d     time.Duration
	on    bool        // w supports write deadlines
	floor *floorState // nil: no floor rate
}

// Start arms the deadline on w's connection (before the header is
// written, which the first Write or Flush sends) and returns the Writer.
// A ResponseWriter without write deadlines (not net/http's server) is
// written without one. Call Stop when the response is over.
func Start(w http.ResponseWriter, d time.Duration) Writer {
	rc := http.NewResponseController(w)
	return Writer{w: w, rc: rc, d: d, on: rc.SetWriteDeadline(time.Now().Add(d)) == nil}
}

// StartFloor is Start with a floor rate: besides each write's deadline of
// d, the writes of the response's first n bytes may wait for the client
// at most f.Grace plus n at f.Rate in all (see Floor), so the client holds
// the response at most f.Grace, plus its size at f.Rate, plus d for its
// last write. A zero f.Rate sets no floor.
func StartFloor(w http.ResponseWriter, d time.Duration, f Floor) Writer {
	s := Start(w, d)
	if f.Rate > 0 {
		s.floor = newFloorState(f)
	}
	return s
}

// Write restarts the deadline and writes p. Under a floor rate, a write
// that comes when the writes before it waited longer than the floor allows
// for their bytes is refused whole (TooSlow).
func (s Writer) Write(p []byte) (int, error) {
	if s.floor == nil {
		if s.on {
			_ = s.rc.SetWriteDeadline(time.Now().Add(s.d))
		}
		return s.w.Write(p)
	}
	if err := s.floor.check(); err != nil {
		return 0, err
	}
	if s.on {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.d))
	}
	start := s.floor.clk.Now()
	n, err := s.w.Write(p)
	s.floor.sent += int64(n)
	s.floor.waited += s.floor.clk.Now().Sub(start)
	return n, err
}

// Flush sends what is buffered to the client, under the deadline of the
// last Write (or of Start); http.ErrNotSupported when w cannot flush.
func (s Writer) Flush() error {
	if s.floor == nil {
		return s.rc.Flush()
	}
	start := s.floor.clk.Now()
	err := s.rc.Flush()
	s.floor.waited += s.floor.clk.Now().Sub(start)
	return err
}

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
