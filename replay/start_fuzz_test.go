package replay

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzParseStart: a request RequestFrames wrote reads back as its start;
// any frame reads as vLLM's int.from_bytes(frame, "big") would, saturated
// at the largest uint64 (which replays nothing) when it does not fit.
func FuzzParseStart(f *testing.F) {
	f.Add(uint64(0), []byte{})
	f.Add(uint64(42), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 7})
	f.Add(uint64(math.MaxUint64), []byte{1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, start uint64, frame []byte) {
		if got := parseStart(RequestFrames(start)[1]); got != start {
			t.Fatalf("RequestFrames(%d) reads back as %d", start, got)
		}
		// The reference: the big-endian integer of every byte, saturated.
		var want uint64
		for _, c := range frame {
			if want > math.MaxUint64>>8 {
				want = math.MaxUint64
				break
			}
			want = want<<8 | uint64(c)
		}
		if got := parseStart(frame); got != want {
			t.Fatalf("parseStart(%x) = %d, want %d", frame, got, want)
		}
		if len(frame) == 8 && parseStart(frame) != binary.BigEndian.Uint64(frame) {
			t.Fatalf("an 8-byte frame is not its big-endian value")
		}
	})
}
