package render

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"
)

// benchTokens returns n token IDs spread over a 152k vocabulary, like a real
// prompt (mostly 4-6 digit IDs).
func benchTokens(n int) []uint32 {
	toks := make([]uint32, n)
	x := uint32(2463534242)
	for i := range toks {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		toks[i] = x % 151936
	}
	return toks
}

// BenchmarkRender measures a full chat render against a local httptest
// server returning 2,048 token IDs in a vLLM-shaped GenerateRequest. Before
// the timed loop it measures the same exchange (same request bytes, same
// response bytes, same HTTP/1.1 transport) done with a bare http.Client and
// io.ReadAll; overhead-ns/op is the client's cost beyond that baseline: body
// edits, budgets, picking, decoding and metrics.
func BenchmarkRender(b *testing.B) {
	toks := benchTokens(2048)
	resp := []byte(generateRequest(toks, "", ""))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(resp)))
		_, _ = w.Write(resp)
	}))
	defer srv.Close()

	c, err := New(DefaultConfig(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.SetEndpoints([]Endpoint{{ID: "10.0.0.1:8000", URL: srv.URL}}); err != nil {
		b.Fatal(err)
	}
	req := chat("Summarize the following document in three sentences.")
	render := func() {
		res, err := c.Render(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		got := res.Prompts[0].TokenIDs
		if len(got) != len(toks) || got[0] != toks[0] || got[len(got)-1] != toks[len(toks)-1] {
			b.Fatalf("rendered %d tokens, want %d", len(got), len(toks))
		}
	}

	// Baseline: the same bytes over a bare client with the same transport.
	wire, _, _, _ := prepareBody(req.Body, false, true)
	raw := &http.Client{Transport: newTransport(nil, DefaultMaxIdleConnsPerHost, 0, nil)}
	defer raw.CloseIdleConnections()
	rawCall := func() {
		hreq, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/chat/completions/render", bytes.NewReader(wire))
		hreq.Header.Set("Content-Type", "application/json")
		r, err := raw.Do(hreq)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil || len(body) != len(resp) {
			b.Fatalf("baseline read %d bytes (%v)", len(body), err)
		}
	}
	for range 20 { // warm both connection pools
		rawCall()
		render()
	}
	// Pairs of (baseline, render) run back to back so that both see the same
	// machine load; the median of the per-pair differences is the overhead.
	diffs := make([]float64, 0, b.N)
	var baseline time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		t0 := time.Now()
		rawCall()
		raw := time.Since(t0)
		baseline += raw
		b.StartTimer()
		t1 := time.Now()
		render()
		diffs = append(diffs, float64(time.Since(t1)-raw))
	}
	b.StopTimer()
	slices.Sort(diffs)
	b.ReportMetric(float64(baseline.Nanoseconds())/float64(b.N), "baseline-ns/op")
	b.ReportMetric(diffs[len(diffs)/2], "overhead-ns/op")
	b.ReportMetric(float64(len(toks)), "tokens/op")
}

// BenchmarkDecodeResponse measures decoding alone: a 2,048-token
// GenerateRequest into a Result.
func BenchmarkDecodeResponse(b *testing.B) {
	toks := benchTokens(2048)
	body := []byte(generateRequest(toks, "", ""))
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for range b.N {
		var res Result
		if err := decodeResponse(body, false, 1, false, &res); err != nil {
			b.Fatal(err)
		}
		if len(res.Prompts[0].TokenIDs) != len(toks) {
			b.Fatal("wrong token count")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(toks)), "ns/token")
}

// BenchmarkPrepareBody measures the render-copy edits (as the parts the
// client sends) on a chat body with a
// 1 MiB inline image, which the scanner must skip.
func BenchmarkPrepareBody(b *testing.B) {
	body := []byte(`{"model":"m","max_tokens":512,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` +
		string(bytes.Repeat([]byte("iVBORw0KGgo"), 1<<20/11)) + `"}},{"type":"text","text":"What is this?"}]}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for range b.N {
		w, _, _, err := prepareWire(body, true, true)
		if last, _ := w.part(w.n - 1); err != nil || w.size != int64(len(body))-2+int64(len(`,"return_mm_kwargs":false`)) || string(last) != "}" {
			b.Fatal("edit failed", err)
		}
	}
}
