package usage

import (
	"bytes"
	"slices"
	"testing"
)

// FuzzUsageScanner feeds arbitrary engine responses, JSON or SSE, to the
// cached-token reader (seed corpus in testdata/fuzz/FuzzUsageScanner): it
// never panics, holds at most MaxBytes of the response at any time,
// reaches the same result however the response is split into reads, reports
// cached tokens only for an observed usage, and, with long set, a line (or
// body) beyond the bound in front of the response is passed over as
// too_large rather than read.
func FuzzUsageScanner(f *testing.F) {
	f.Add([]byte(`{"id":"x","usage":{"prompt_tokens":300,"prompt_tokens_details":{"cached_tokens":256}}}`), false, uint8(7), false)
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens_details\":{\"cached_tokens\":192}}}\r\n\r\ndata: [DONE]\n\n"), true, uint8(5), false)
	f.Add([]byte("event: response.completed\ndata: {\"response\":{\"usage\":{\"input_tokens_details\":{\"cached_tokens\":128}}}}"), true, uint8(1), true)
	f.Add([]byte("data: {\"usage\":\ndata: {\"usage\":{\"cache_read_input_tokens\":-4}}\n"), true, uint8(3), false)
	f.Add([]byte(`{"usage":{"input_tokens_details":{"cached_tokens":1e99}}}`), false, uint8(2), true)
	f.Fuzz(func(t *testing.T, resp []byte, sse bool, piece uint8, long bool) {
		if long {
			pad := append([]byte("data: "), bytes.Repeat([]byte{'a'}, MaxBytes)...)
			resp = append(append(pad, '\n'), resp...)
		}
		run := func(size int) (int, string) {
			u := &Scanner{SSE: sse}
			for p := resp; len(p) > 0; {
				n := min(size, len(p))
				u.Write(p[:n])
				p = p[n:]
				if len(u.buf) > MaxBytes {
					t.Fatalf("holding %d bytes of the response", len(u.buf))
				}
			}
			return u.Result()
		}
		cached, result := run(len(resp) + 1)
		size := int(piece%32) + 1
		if long {
			size *= 4093 // a megabyte in one-byte reads would slow fuzzing to a crawl
		}
		if c, r := run(size); c != cached || r != result {
			t.Fatalf("in %d-byte reads: %d %s, in one read: %d %s", size, c, r, cached, result)
		}
		if !slices.Contains(Results, result) {
			t.Fatalf("result %q", result)
		}
		if result != Observed && cached != 0 {
			t.Fatalf("%d cached tokens with result %s", cached, result)
		}
		if long && !sse && result != TooLarge {
			t.Fatalf("a body beyond the bound read as %s", result)
		}
		if long && sse && result != TooLarge && result != Observed && result != Invalid {
			t.Fatalf("a stream with a line beyond the bound read as %s", result)
		}
	})
}
