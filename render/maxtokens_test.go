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

// TestMaxTokensReadsIntegersAsPydantic reads the cap as vLLM's request
// models do (pydantic's lax int): an integral float ("max_tokens": 100.0,
// 1e2), a string of an integer, true as 1. vLLM caps the answer at 100 for
// each of them; MaxTokens reported no cap, and the decode pick charged the
// endpoint the configured default instead. The wants are pydantic 2's
// (Optional[int] on json.loads of the body).
func TestMaxTokensReadsIntegersAsPydantic(t *testing.T) {
	for _, tc := range []struct {
		value string
		n     int64 // 0: pydantic refuses it, or it is not positive
	}{
		{`100`, 100},
		{`100.0`, 100},
		{`1e2`, 100},
		{`1E+2`, 100},
		{`100.000`, 100},
		{`1.0e0`, 1},
		{`-1.0`, 0},
		{`-0.0`, 0},
		{`10.5`, 0},
		{`10.000000000000001`, 0},
		{`1e400`, 0},
		{`1e20`, 0},
		{`"100"`, 100},
		{`" 100 "`, 100},
		{`"\t100\n"`, 100},
		{`"+100"`, 100},
		{`"0100"`, 100},
		{`"1_00"`, 100},
		{`"100.00"`, 100},
		{`"1_0.0"`, 10},
		{`"\u0031\u0030"`, 10},
		{`"-5"`, 0},
		{`"100."`, 0},
		{`".0"`, 0},
		{`"1__0"`, 0},
		{`"_10"`, 0},
		{`"10_"`, 0},
		{`"10.5"`, 0},
		{`"1e2"`, 0},
		{`"0x10"`, 0},
		{`"1 0"`, 0},
		{`"1,000"`, 0},
		{`" "`, 0},
		{`""`, 0},
		{`"true"`, 0},
		{`true`, 1},
		{`false`, 0},
		{`[100]`, 0},
		{`{"n":100}`, 0},
	} {
		body := `{"model":"m","max_tokens":` + tc.value + `}`
		n, ok := MaxTokens([]byte(body))
		if n != tc.n || ok != (tc.n > 0) {
			t.Errorf("max_tokens %s: %d, %v; want %d, %v", tc.value, n, ok, tc.n, tc.n > 0)
		}
	}
}
