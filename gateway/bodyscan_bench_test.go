package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// benchBody is a chat request of the shape the gateway forwards: 64
// messages of prose with escapes, a tool schema, a logit_bias map of numbers
// and the "model" member last, so that bodyModel has to skip every kind of
// value before it finds the one it reads.
func benchBody() []byte {
	var b strings.Builder
	b.WriteString(`{"messages":[`)
	for i := range 64 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":%q,"content":"turn %d: %s"}`, []string{"user", "assistant"}[i%2], i,
			strings.Repeat(`the quick brown fox \"jumps\"\n over the lazy dog `, 8))
	}
	b.WriteString(`],"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object",` +
		`"properties":{"q":{"type":"string"},"n":{"type":"integer","minimum":1,"maximum":50}},"required":["q"]}}}],`)
	b.WriteString(`"logit_bias":{`)
	for i := range 200 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d":%d.5e-1`, 1000+i, -i)
	}
	b.WriteString(`},"temperature":0.7,"stream":true,"stop":null,"max_tokens":512,"model":"llama-3-8b"}`)
	return []byte(b.String())
}

// BenchmarkBodyModel holds bodyModel against the decoder it replaced,
// encoding/json reading the body into a struct of only "model" (which
// validates the whole body too). Both run in one loop, alternating, so
// machine load hits both alike; json/bodyModel is the ratio from the same
// run.
func BenchmarkBodyModel(b *testing.B) {
	body := benchBody()
	var scan, std time.Duration
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		t0 := time.Now()
		m, err := bodyModel(body)
		t1 := time.Now()
		var v struct {
			Model string `json:"model"`
		}
		jerr := json.Unmarshal(body, &v)
		t2 := time.Now()
		if err != nil || jerr != nil || m != "llama-3-8b" || v.Model != m {
			b.Fatal("wrong model", m, err, jerr)
		}
		scan += t1.Sub(t0)
		std += t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(scan.Nanoseconds())/n, "bodymodel-ns/op")
	b.ReportMetric(float64(std.Nanoseconds())/n, "json-ns/op")
	b.ReportMetric(float64(std)/float64(scan), "json/bodyModel")
}
