package enginemetrics

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// bigPage is a /metrics page the size of a busy vLLM server's: the three
// gauges among 40 histogram families of 20 buckets each, for two engines.
func bigPage() []byte {
	var b bytes.Buffer
	for f := range 40 {
		fmt.Fprintf(&b, "# HELP vllm:histogram_%d A histogram.\n# TYPE vllm:histogram_%d histogram\n", f, f)
		for e := range 2 {
			for i := range 20 {
				fmt.Fprintf(&b, "vllm:histogram_%d_bucket{engine=\"%d\",le=\"%d\",model_name=\"Qwen/Qwen3-32B\"} %d\n", f, e, 1<<i, i*7)
			}
			fmt.Fprintf(&b, "vllm:histogram_%d_bucket{engine=\"%d\",le=\"+Inf\",model_name=\"Qwen/Qwen3-32B\"} 140\n", f, e)
			fmt.Fprintf(&b, "vllm:histogram_%d_count{engine=\"%d\",model_name=\"Qwen/Qwen3-32B\"} 140\n", f, e)
			fmt.Fprintf(&b, "vllm:histogram_%d_sum{engine=\"%d\",model_name=\"Qwen/Qwen3-32B\"} 1234.5\n", f, e)
		}
		if f == 20 {
			b.WriteString(dpSample)
		}
	}
	return b.Bytes()
}

// BenchmarkParseSignal is the scraper's parse of a large page (the gauges'
// lines only); BenchmarkParseWholePage, the floor to compare it with,
// parses every line with expfmt as a generic scraper would.
func BenchmarkParseSignal(b *testing.B) {
	page := bigPage()
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseSignal(page, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseWholePage(b *testing.B) {
	page := bigPage()
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		p := expfmt.NewTextParser(model.UTF8Validation)
		if _, err := p.TextToMetricFamilies(bytes.NewReader(page)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFilterLines(b *testing.B) {
	page := bigPage()
	b.SetBytes(int64(len(page)))
	for b.Loop() {
		filterLines(page)
	}
}
