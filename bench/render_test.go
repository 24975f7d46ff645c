package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/render"
)

// renderAnswer is what vLLM's /v1/completions/render returns for one
// prompt: a JSON array with one GenerateRequest, every field present.
func renderAnswer(tokens []uint32) []byte {
	var sb strings.Builder
	sb.WriteString(`[{"request_id":"cmpl-bench","token_ids":[`)
	for i, t := range tokens {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatUint(uint64(t), 10))
	}
	sb.WriteString(`],"token_offsets":null,"features":null,"content_parts":null,` +
		`"sampling_params":{"n":1,"temperature":1.0,"top_p":1.0,"max_tokens":16,"min_tokens":0,"stop":[],"stop_token_ids":[]},` +
		`"model":"` + Model + `","return_token_ids":true,"output_mode":"tokens","stream":false,"cache_salt":null,"priority":0}]`)
	return []byte(sb.String())
}

// BenchmarkRender measures one render call of a 2,048-token completions
// prompt through render.Client against a renderer on loopback HTTP: body
// preparation, the POST, reading and decoding the answer. The renderer
// returns a canned answer, so the figure is the client's and the loopback's
// cost, not tokenization. Reports rendered tokens/s.
func BenchmarkRender(b *testing.B) {
	tokens := Tokens(11, 2048)
	answer := renderAnswer(tokens)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/completions/render" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	defer srv.Close()
	cfg := render.DefaultConfig()
	cfg.URL = srv.URL
	cfg.ModelName = Model
	c, err := render.New(cfg, render.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := &render.Request{API: render.APICompletions,
		Body: []byte(`{"model":"` + Model + `","prompt":"Summarise the attached contract in three bullet points.","max_tokens":16}`)}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := c.Render(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Prompts) != 1 || len(res.Prompts[0].TokenIDs) != len(tokens) ||
			res.Prompts[0].TokenIDs[len(tokens)-1] != tokens[len(tokens)-1] {
			b.Fatalf("render result %+v does not match the renderer's answer", res.Prompts)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)*float64(len(tokens))/b.Elapsed().Seconds(), "tokens/s")
}
