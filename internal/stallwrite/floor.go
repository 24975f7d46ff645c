package stallwrite

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvroute/kvroute/telemetry"
)

// Floor is a minimum transfer rate for a response of known worth but
// unknown length, such as an index snapshot streamed to a peer. The
// per-write deadline alone lets a client that takes a little within every
// deadline hold the response for as long as it likes; under a floor, the
// writes of the response's first n bytes may wait for the client at most
// Grace plus n at Rate bytes per second in all, and a write that comes
// later is refused. Only the time the writes wait counts: the time the
// handler takes to produce the bytes between them is not the client's.
// A response whose client legitimately trickles (a streamed completion)
// must not have one.
type Floor struct {
	// Rate is the bytes per second the client must take on average once
	// Grace is spent; 0 sets no floor.
	Rate int64
	// Grace is the time the writes may wait on top of their bytes at
	// Rate: the client's start, a slow first read.
	Grace time.Duration
	// Clock tells the floor's time (nil: the wall clock). The per-write
	// deadlines stay socket deadlines, on the wall clock.
	Clock telemetry.Clock
}

// errTooSlow is a write the floor rate cut.
var errTooSlow = errors.New("stallwrite: the client took the response slower than its floor rate")

// TooSlow reports whether err, from Write or Flush, is the floor rate:
// the client took the response's bytes slower than Floor allows. It is
// never Stalled.
func TooSlow(err error) bool { return errors.Is(err, errTooSlow) }

// floorState is a Writer's floor: the bytes sent so far and the time
// their writes waited.
type floorState struct {
	f      Floor
	clk    telemetry.Clock
	sent   int64
	waited time.Duration
}

func newFloorState(f Floor) *floorState {
	clk := f.Clock
	if clk == nil {
		clk = telemetry.Wall
	}
	return &floorState{f: f, clk: clk}
}

// check returns the floor's error when the writes so far waited longer
// than the floor allows for their bytes.
func (s *floorState) check() error {
	r := s.f.Rate
	allowed := s.f.Grace + time.Duration(s.sent/r)*time.Second + time.Duration(s.sent%r)*time.Second/time.Duration(r)
	if s.waited > allowed {
		return fmt.Errorf("%w: %d bytes waited %v for the client, the floor allows %v", errTooSlow, s.sent,
			s.waited.Round(time.Millisecond), allowed.Round(time.Millisecond))
	}
	return nil
}
