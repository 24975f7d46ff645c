package server

import (
	"encoding/json"
	"testing"
)

// FuzzRequestPrompt feeds arbitrary JSON bodies to the prompt builders of all
// four APIs: they must never panic, and a prompt they accept is never empty.
func FuzzRequestPrompt(f *testing.F) {
	f.Add([]byte(`{"model":"m","prompt":["a","b"],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url"}]}],"input":[{"role":"user","content":"x"},{"type":"function_call"}],"system":"s"}`))
	f.Add([]byte(`{"prompt":[[1,2],[3]],"messages":[{"role":"tool","content":null,"tool_calls":[{"id":"1"}]}],"tools":[{"name":"f"}]}`))
	f.Add([]byte(`{"prompt":"","messages":[],"input":""}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(tokens []uint32, e *apiError) {
			if e == nil && len(tokens) == 0 {
				t.Fatalf("accepted an empty prompt from %q", body)
			}
			if e != nil && (e.status < 400 || e.message == "") {
				t.Fatalf("bad error %+v", e)
			}
		}
		var c completionRequest
		if json.Unmarshal(body, &c) == nil {
			ps, e := c.prompts()
			if e == nil && len(ps) == 0 {
				t.Fatalf("no prompts from %q", body)
			}
			for _, p := range ps {
				check(p, e)
			}
		}
		var ch chatRequest
		if json.Unmarshal(body, &ch) == nil {
			check(ch.prompt())
		}
		var m messagesRequest
		if json.Unmarshal(body, &m) == nil {
			check(m.prompt())
		}
		var r responsesRequest
		if json.Unmarshal(body, &r) == nil {
			check(r.prompt())
		}
	})
}
