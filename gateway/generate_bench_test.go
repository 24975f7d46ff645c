package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/mmfeatures"
)

// BenchmarkGeneratePrompt holds generatePrompt, on a 2,000-token
// GenerateRequest with one image, against encoding/json reading the same
// body into a struct of its three members (the decoder generatePrompt used
// before it matched member names exactly). Both run in one loop,
// alternating, so machine load hits both alike; json/generatePrompt is the
// ratio from the same run.
func BenchmarkGeneratePrompt(b *testing.B) {
	body := []byte(generateBody(2000, `{"mm_hashes":{"image":["4f2a9c"]},"mm_placeholders":{"image":[{"offset":16,"length":576}]},"kwargs_data":{"image":[null]}}`))
	body = append(body[:len(body)-1], `,"sampling_params":{"max_tokens":256,"temperature":0.7},"model":"llama","stream":true,"cache_salt":"salt"}`...)
	var ours, std time.Duration
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		t0 := time.Now()
		p, salt, err := generatePrompt(body)
		t1 := time.Now()
		var g struct {
			TokenIDs  []uint32             `json:"token_ids"`
			CacheSalt *string              `json:"cache_salt"`
			Features  *mmfeatures.Features `json:"features"`
		}
		jerr := json.Unmarshal(body, &g)
		t2 := time.Now()
		if err != nil || jerr != nil || len(p.TokenIDs) != 2000 || len(p.Features) != 1 || salt != "salt" || len(g.TokenIDs) != 2000 {
			b.Fatal("wrong prompt", err, jerr)
		}
		ours += t1.Sub(t0)
		std += t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(ours.Nanoseconds())/n, "generateprompt-ns/op")
	b.ReportMetric(float64(std.Nanoseconds())/n, "json-ns/op")
	b.ReportMetric(float64(std)/float64(ours), "json/generatePrompt")
}
