package jsonstr

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

// Two prompt shapes of about 20 KB: plain words without escapes, and a
// chat/code transcript with an escape every few bytes.
func benchShapes() map[string][]byte {
	plain := `"` + strings.Repeat("the quick brown fox jumps over the lazy dog ", 460) + `"`
	dense := `"` + strings.Repeat(`line \"q\"\n\tx\\y `, 1000) + `"`
	return map[string][]byte{"plain": []byte(plain), "escapes": []byte(dense)}
}

// BenchmarkStringEnd runs StringEnd and the two scans it replaced, in one
// loop, alternating, on each shape: memchr, the render client's earlier scan
// (search the closing quote with bytes.IndexByte, then backslashes and
// control bytes in the segment before it), and table, the gateway's earlier
// byte-at-a-time loop. The ratios memchr/jsonstr and table/jsonstr come from
// the same run.
func BenchmarkStringEnd(b *testing.B) {
	for _, name := range []string{"plain", "escapes"} {
		s := benchShapes()[name]
		b.Run(name, func(b *testing.B) {
			var tj, tm, tt time.Duration
			b.ReportAllocs()
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				// Each scan runs twice and the second is timed, so that
				// none pays for bringing the string into the cache.
				StringEnd(s, 0)
				t0 := time.Now()
				e1, _, err := StringEnd(s, 0)
				t1 := time.Now()
				memchrEnd(s)
				t2 := time.Now()
				e2, _, ok2 := memchrEnd(s)
				t3 := time.Now()
				tableEnd(s)
				t4 := time.Now()
				e3, _, ok3 := tableEnd(s)
				t5 := time.Now()
				if err != nil || !ok2 || !ok3 || e1 != len(s) || e2 != e1 || e3 != e1 {
					b.Fatal("wrong end", e1, e2, e3, err)
				}
				tj += t1.Sub(t0)
				tm += t3.Sub(t2)
				tt += t5.Sub(t4)
			}
			n := float64(b.N)
			b.ReportMetric(float64(tj.Nanoseconds())/n, "jsonstr-ns/op")
			b.ReportMetric(float64(tm.Nanoseconds())/n, "memchr-ns/op")
			b.ReportMetric(float64(tt.Nanoseconds())/n, "table-ns/op")
			b.ReportMetric(float64(tm)/float64(tj), "memchr/jsonstr")
			b.ReportMetric(float64(tt)/float64(tj), "table/jsonstr")
		})
	}
}

// memchrEnd is the render client's string scan before jsonstr.
func memchrEnd(b []byte) (end int, escaped, ok bool) {
	i := 1
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return 0, false, false
		}
		seg := b[i : i+q]
		bs := bytes.IndexByte(seg, '\\')
		if bs < 0 {
			if hasControl(seg) {
				return 0, false, false
			}
			return i + q + 1, escaped, true
		}
		if hasControl(seg[:bs]) {
			return 0, false, false
		}
		escaped = true
		j := i + bs + 1
		if j >= len(b) {
			return 0, false, false
		}
		switch b[j] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i = j + 1
		case 'u':
			if j+5 > len(b) || !isHex4(b[j+1:j+5]) {
				return 0, false, false
			}
			i = j + 5
		default:
			return 0, false, false
		}
	}
}

func hasControl(b []byte) bool {
	const k, h = 0x2020202020202020, 0x8080808080808080
	for len(b) >= 32 {
		x0 := binary.LittleEndian.Uint64(b)
		x1 := binary.LittleEndian.Uint64(b[8:])
		x2 := binary.LittleEndian.Uint64(b[16:])
		x3 := binary.LittleEndian.Uint64(b[24:])
		if ((x0-k)&^x0|(x1-k)&^x1|(x2-k)&^x2|(x3-k)&^x3)&h != 0 {
			return true
		}
		b = b[32:]
	}
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		if (x-k)&^x&h != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

var tableSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// tableEnd is the gateway's string scan before jsonstr.
func tableEnd(b []byte) (end int, escaped, ok bool) {
	for i := 1; i < len(b); {
		c := b[i]
		if !tableSpecial[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1, escaped, true
		case c < 0x20:
			return 0, false, false
		}
		escaped = true
		if i+1 >= len(b) {
			break
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
				return 0, false, false
			}
			i += 6
		default:
			return 0, false, false
		}
	}
	return 0, false, false
}
