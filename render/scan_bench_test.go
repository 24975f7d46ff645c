package render

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkScanVersusEncodingJSON holds the response scanner against its
// fair rival, encoding/json decoding the same 2,048-token GenerateRequest
// into a struct of exactly the fields the scanner reads. Both run in the
// same loop, alternating, so machine load hits both alike; json/scanner is
// the ratio of their times.
func BenchmarkScanVersusEncodingJSON(b *testing.B) {
	toks := benchTokens(2048)
	body := []byte(generateRequest(toks, `{"mm_hashes":{"image":["h1"]},"mm_placeholders":{"image":[{"offset":3,"length":8}]}}`, "s"))
	type generate struct {
		TokenIDs []uint32 `json:"token_ids"`
		Features *struct {
			MMHashes       map[string][]string `json:"mm_hashes"`
			MMPlaceholders map[string][]struct {
				Offset int `json:"offset"`
				Length int `json:"length"`
			} `json:"mm_placeholders"`
		} `json:"features"`
		CacheSalt *string `json:"cache_salt"`
	}
	var scan, std time.Duration
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		t0 := time.Now()
		var res Result
		if err := decodeResponse(body, false, 1, false, &res); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		var g generate
		if err := json.Unmarshal(body, &g); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		scan += t1.Sub(t0)
		std += t2.Sub(t1)
		if len(res.Prompts[0].TokenIDs) != len(toks) || len(g.TokenIDs) != len(toks) || res.CacheSalt != "s" || *g.CacheSalt != "s" {
			b.Fatal("wrong decode")
		}
	}
	b.ReportMetric(float64(scan.Nanoseconds())/float64(b.N), "scanner-ns/op")
	b.ReportMetric(float64(std.Nanoseconds())/float64(b.N), "encoding-json-ns/op")
	b.ReportMetric(float64(std)/float64(scan), "json/scanner")
}
