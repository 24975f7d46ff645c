package render

import "github.com/kvroute/kvroute/internal/jsonids"

// MaxTokens returns the output-token cap a request body asks for: its
// top-level max_completion_tokens (the Chat Completions API's current
// name), else max_tokens (Completions, Chat Completions, Anthropic
// Messages), else max_output_tokens (Responses); of duplicate keys the
// last, as a JSON decoder keeps it. A null counts as absent, as in vLLM
// ({"max_completion_tokens":null,"max_tokens":100} caps the answer at
// 100); the first of the three present and not null decides. Its value is
// read as vLLM's request models read an int (pydantic's lax mode): an
// integer, a float with no fractional part (100.0, 1e2), a string of an
// integer (" +1_000 ", "100.00") or true (1). ok is false when the body is
// not a JSON object or that one is not such a positive integer (2.5, "1e2",
// 0; vLLM refuses the request or it asks for nothing), or none is there:
// the engine then caps the answer at the context's rest, and a caller uses
// its own estimate. The body is scanned, not decoded: nested values are
// skipped.
func MaxTokens(body []byte) (n int64, ok bool) {
	f, err := scanTop(body)
	if err != nil {
		return 0, false
	}
	for _, spans := range [][]span{f.maxCompletionTokens, f.maxTokens, f.maxOutputTokens} {
		if len(spans) == 0 {
			continue
		}
		v := spans[len(spans)-1]
		if string(body[v.start:v.end]) == "null" {
			continue
		}
		x, ok := jsonids.LaxInt(body[v.start:v.end])
		if !ok || x <= 0 {
			return 0, false
		}
		return x, true
	}
	return 0, false
}
