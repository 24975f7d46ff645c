package server

import "encoding/json"

// Output modes of vLLM's GenerateRequest (output_mode): "tokens", the
// default, answers the generated token IDs only; "text" also answers their
// detokenized text, in each choice's "text" (the whole text, or a stream
// chunk's delta). Both answers name their mode in "output_mode".
const (
	outputTokens = "tokens"
	outputText   = "text"
)

// outputMode reads a GenerateRequest's output_mode, raw being its JSON
// value (nil when absent), as vLLM's request model reads it: "tokens" or
// "text", nothing else (null included, the field not being optional); and
// "text" only while sampling_params.detokenize (detokenize, nil when
// absent: true) is true. vLLM answers the others 400; so does the
// simulated engine, rather than answering token IDs in a mode the client
// did not ask for.
func outputMode(raw json.RawMessage, detokenize *bool) (string, *apiError) {
	if raw == nil {
		return outputTokens, nil
	}
	var m *string
	if json.Unmarshal(raw, &m) != nil || m == nil || (*m != outputTokens && *m != outputText) {
		return "", withParam(badRequest("output_mode: Input should be 'tokens' or 'text'"), "output_mode")
	}
	if *m == outputText && detokenize != nil && !*detokenize {
		return "", badRequest("output_mode='text' requires sampling_params.detokenize to be true")
	}
	return *m, nil
}

// textOf is a choice's text in mode: t in text mode, none in tokens mode.
func textOf(mode, t string) *string {
	if mode != outputText {
		return nil
	}
	return &t
}
