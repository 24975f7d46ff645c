package render

import "testing"

// TestMaxTokens reads the output cap under each API's name, the last of
// duplicates, passes over a null to the next name (as vLLM does: a chat
// body's "max_completion_tokens": null with "max_tokens": 100 is capped at
// 100, where MaxTokens reported no cap), and refuses what is not a positive
// integer.
func TestMaxTokens(t *testing.T) {
	for _, tc := range []struct {
		body string
		n    int64
		ok   bool
	}{
		{`{"model":"m","max_tokens":256}`, 256, true},
		{`{"max_completion_tokens":64,"max_tokens":256}`, 64, true},
		{`{"max_tokens":256,"max_completion_tokens":64}`, 64, true},
		{`{"input":"x","max_output_tokens":900}`, 900, true},
		{`{"max_tokens":1,"max_tokens":7}`, 7, true},
		{`{"messages":[{"max_tokens":5}]}`, 0, false},
		{`{"max_tokens":null}`, 0, false},
		{`{"messages":[],"max_completion_tokens":null,"max_tokens":100}`, 100, true},
		{`{"max_completion_tokens":64,"max_completion_tokens":null,"max_tokens":100}`, 100, true},
		{`{"max_tokens":null,"max_output_tokens":900}`, 900, true},
		{`{"max_completion_tokens":null,"max_tokens":null}`, 0, false},
		{`{"max_tokens":0}`, 0, false},
		{`{"max_tokens":-3}`, 0, false},
		{`{"max_tokens":2.5}`, 0, false},
		{`{"max_tokens":"9"}`, 0, false},
		{`{}`, 0, false},
		{`[1]`, 0, false},
		{``, 0, false},
	} {
		n, ok := MaxTokens([]byte(tc.body))
		if n != tc.n || ok != tc.ok {
			t.Errorf("%s: %d, %v; want %d, %v", tc.body, n, ok, tc.n, tc.ok)
		}
	}
}
