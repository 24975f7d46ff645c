package sidecar

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzBodies feeds arbitrary client bodies and prefiller answers through the
// JSON handling: PrefillBody either rejects the body with ErrBadRequest or
// yields an object with max_tokens 1, stream false, no stream_options and
// do_remote_decode; TransferParams either rejects the answer or yields an
// object with do_remote_prefill true; DecodeBody carries those params
// verbatim. Nothing panics.
func FuzzBodies(f *testing.F) {
	f.Add([]byte(`{"model":"m","prompt":"hi","max_tokens":9,"stream":true,"stream_options":{"include_usage":true}}`),
		[]byte(`{"kv_transfer_params":{"do_remote_prefill":true,"remote_block_ids":[1,2],"remote_host":"h","remote_port":1}}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":3}`),
		[]byte(`{"kv_transfer_params":{"do_remote_prefill":"yes"}}`))
	f.Add([]byte(`{"kv_transfer_params":{"do_remote_decode":false}}`), []byte(`{"kv_transfer_params":null}`))
	f.Add([]byte(`null`), []byte(`[]`))
	f.Add([]byte(`{"a":1}{"b":2}`), []byte(`{"kv_transfer_params":{"do_remote_prefill":true,"x":{"y":[1e400]}}}`))
	f.Add([]byte(`{"a":"\ud800"}`), []byte(`{"kv_transfer_params":{"do_remote_prefill":true}} trailing`))
	f.Fuzz(func(t *testing.T, body, resp []byte) {
		pb, err := PrefillBody(body)
		if err == nil {
			var m map[string]json.RawMessage
			if json.Unmarshal(pb, &m) != nil {
				t.Fatalf("PrefillBody gave invalid JSON %q", pb)
			}
			if string(m["max_tokens"]) != "1" || string(m["stream"]) != "false" {
				t.Fatalf("prefill body %q: max_tokens/stream not forced", pb)
			}
			if _, ok := m["stream_options"]; ok {
				t.Fatalf("prefill body %q keeps stream_options", pb)
			}
			var kv struct {
				D bool `json:"do_remote_decode"`
				P bool `json:"do_remote_prefill"`
			}
			if json.Unmarshal(m["kv_transfer_params"], &kv) != nil || !kv.D || kv.P {
				t.Fatalf("prefill body %q: bad kv_transfer_params", pb)
			}
		}
		params, perr := TransferParams(resp)
		if perr != nil {
			return
		}
		var p map[string]json.RawMessage // exact names, as vLLM reads them
		if json.Unmarshal(params, &p) != nil || string(p["do_remote_prefill"]) != "true" {
			t.Fatalf("TransferParams(%q) = %q without do_remote_prefill true", resp, params)
		}
		db, derr := DecodeBody(body, params)
		if (derr == nil) != (err == nil) {
			t.Fatalf("PrefillBody and DecodeBody disagree on %q: %v / %v", body, err, derr)
		}
		if derr != nil {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(db, &m) != nil {
			t.Fatalf("DecodeBody gave invalid JSON %q", db)
		}
		var a, b bytes.Buffer
		if json.Compact(&a, m["kv_transfer_params"]) != nil || json.Compact(&b, params) != nil || a.String() != b.String() {
			t.Fatalf("decode body %q does not carry params %q", db, params)
		}
	})
}
