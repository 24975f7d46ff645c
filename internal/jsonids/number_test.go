package jsonids

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// numberLoop is Number's meaning, digit by digit: the reference the
// word-at-a-time reading must agree with.
func numberLoop(b []byte, i int) (uint32, int, bool) {
	start := i
	var v uint64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' && i-start <= 10 {
		v = v*10 + uint64(b[i]-'0')
		i++
	}
	n := i - start
	if n == 0 || n > 10 || v > math.MaxUint32 || (n > 1 && b[start] == '0') {
		return 0, 0, false
	}
	return uint32(v), i, true
}

// numberAgrees checks Number against numberLoop at every start in b.
func numberAgrees(t *testing.T, b []byte) {
	t.Helper()
	for i := 0; i <= len(b); i++ {
		wv, wn, wok := numberLoop(b, i)
		v, n, ok := Number(b, i)
		if ok != wok || (ok && (v != wv || n != wn)) {
			t.Fatalf("Number(%q, %d) = %d, %d, %v; want %d, %d, %v", b, i, v, n, ok, wv, wn, wok)
		}
	}
}

var numberSeeds = []string{
	"", "0", "00", "01", "7", "123,", "12345678", "123456789", "1234567890", "12345678901", "4294967295", "4294967296",
	"9999999999", "99999999,", "0,1,2", "[151935,0,42]", "12 34", "1\x80", "1/", "1:", "\xb0\xb1", "00000000", "000000001",
	"42949672950", "151935,151935,151935,",
}

func TestNumberMatchesTheDigitLoop(t *testing.T) {
	for _, s := range numberSeeds {
		numberAgrees(t, []byte(s))
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("0123456789,] \x80/:")
	for range 20000 {
		b := make([]byte, r.IntN(24))
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = byte('0' + r.IntN(10))
			}
		}
		numberAgrees(t, b)
	}
	// Every ID of every length, followed by a comma and padding, so the
	// word-at-a-time path reads it.
	for _, v := range []uint64{0, 9, 10, 99, 100, 12345678, 99999999, 100000000, 999999999, 1000000000, math.MaxUint32, math.MaxUint32 + 1} {
		b := []byte(strconv.FormatUint(v, 10) + ",00000000000")
		got, n, ok := Number(b, 0)
		require.Equal(t, v <= math.MaxUint32, ok, "%d", v)
		if ok {
			require.Equal(t, uint32(v), got)
			require.Equal(t, len(strconv.FormatUint(v, 10)), n)
		}
	}
}

func FuzzNumberMatchesTheDigitLoop(f *testing.F) {
	for _, s := range numberSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { numberAgrees(t, b) })
}

// BenchmarkNumber reads a render response's 2,048 IDs with Number and with
// the digit-by-digit loop it replaces, in one run: the ratio is the
// benchmark's result (x-loop), with ns/id.
func BenchmarkNumber(b *testing.B) {
	ids := make([]uint32, 2048)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range ids {
		ids[i] = r.Uint32N(151936) // a Qwen vocabulary
	}
	text := Append(nil, ids)
	// Two copies of one loop, so that each call is direct, as in the
	// parsers.
	readLoop := func() (sum uint64) {
		for i := 1; i < len(text); {
			v, n, ok := numberLoop(text, i)
			if !ok {
				b.Fatalf("no ID at %d", i)
			}
			sum, i = sum+uint64(v), n+1
		}
		return sum
	}
	readWord := func() (sum uint64) {
		for i := 1; i < len(text); {
			v, n, ok := Number(text, i)
			if !ok {
				b.Fatalf("no ID at %d", i)
			}
			sum, i = sum+uint64(v), n+1
		}
		return sum
	}
	var want uint64
	for _, v := range ids {
		want += uint64(v)
	}
	b.ReportAllocs()
	var loop, word int64
	for b.Loop() {
		t0 := nanotime()
		s1 := readLoop()
		t1 := nanotime()
		s2 := readWord()
		t2 := nanotime()
		if s1 != want || s2 != want {
			b.Fatalf("sums %d, %d; want %d", s1, s2, want)
		}
		loop, word = loop+t1-t0, word+t2-t1
	}
	b.ReportMetric(float64(word)/float64(loop), "x-loop")
	b.ReportMetric(float64(word)/float64(b.N)/float64(len(ids)), "ns/id")
}

func nanotime() int64 { return time.Now().UnixNano() }
