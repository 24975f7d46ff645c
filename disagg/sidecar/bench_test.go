package sidecar

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// BenchmarkRewriteBodies measures the sidecar's JSON work for one split
// request as Exchange.Prefill does it (one parse of the client body, the
// prefill body, TransferParams on the answer, the decode body) on a 16 KiB
// chat body, against the floor of decoding and re-encoding that body once
// as a generic map, timed in the same run; x-floor is the ratio.
func BenchmarkRewriteBodies(b *testing.B) {
	body, err := json.Marshal(map[string]any{"model": "m", "max_tokens": 256, "stream": true,
		"stream_options": map[string]any{"include_usage": true},
		"messages": []map[string]any{{"role": "system", "content": strings.Repeat("You route requests. ", 800)},
			{"role": "user", "content": "hello"}}})
	if err != nil {
		b.Fatal(err)
	}
	resp := []byte(`{"id":"p","choices":[{"text":"a"}],"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"e","remote_block_ids":[1,2,3,4,5,6,7,8],"remote_host":"10.0.0.1","remote_port":5600,"tp_size":1}}`)
	var floor, work time.Duration
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		t0 := time.Now()
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(m); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		parsed, err := parseObject(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := prefillBody(parsed, "/v1/chat/completions", nil); err != nil {
			b.Fatal(err)
		}
		p, err := TransferParams(resp)
		if err != nil {
			b.Fatal(err)
		}
		d, err := decodeBody(parsed, p, nil)
		if err != nil || len(d) < len(body) {
			b.Fatal(err, len(d))
		}
		t2 := time.Now()
		floor += t1.Sub(t0)
		work += t2.Sub(t1)
		n++
	}
	b.ReportMetric(float64(work.Microseconds())/float64(n), "rewrite-µs/req")
	b.ReportMetric(float64(floor.Microseconds())/float64(n), "floor-µs/req")
	b.ReportMetric(float64(work)/float64(floor), "x-floor")
}
