package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkReadBody holds readBody, which grows its buffer as the body
// arrives, against the floor of what it replaced for a body with a
// Content-Length: one buffer of that length filled by io.ReadFull. Both run
// in one loop, alternating, so machine load hits both alike;
// readbody/floor is the ratio from the same run. Below 64 KiB both make
// one buffer; above, readBody doubles from 64 KiB.
func BenchmarkReadBody(b *testing.B) {
	for _, size := range []int{16 << 10, 256 << 10, 4 << 20} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			h, err := New(Config{}, new(RoundRobin), Options{})
			if err != nil {
				b.Fatal(err)
			}
			body := bytes.Repeat([]byte("x"), size)
			w := httptest.NewRecorder()
			req := func() *http.Request {
				r := httptest.NewRequest(http.MethodPost, "/v1/completions", bytes.NewReader(body))
				r.ContentLength = int64(size)
				return r
			}
			var grown, floor time.Duration
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				r1, r2 := req(), req()
				t0 := time.Now()
				got, held, err := h.readBody(w, r1)
				t1 := time.Now()
				buf := make([]byte, r2.ContentLength)
				_, ferr := io.ReadFull(http.MaxBytesReader(w, r2.Body, h.cfg.MaxBodyBytes), buf)
				t2 := time.Now()
				h.budget.Release(held)
				if err != nil || ferr != nil || len(got) != size {
					b.Fatal(err, ferr, len(got))
				}
				grown += t1.Sub(t0)
				floor += t2.Sub(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(grown.Nanoseconds())/n, "readbody-ns/op")
			b.ReportMetric(float64(floor.Nanoseconds())/n, "floor-ns/op")
			b.ReportMetric(float64(grown)/float64(floor), "readbody/floor")
		})
	}
}
