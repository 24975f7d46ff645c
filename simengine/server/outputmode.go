package server

import "encoding/json"

// Output modes of a GenerateRequest (output_mode): "tokens", the default
// and the mode vLLM's answers name, answers the generated token IDs only;
// "text" also answers their detokenized text, in each choice's "text" (the
// whole text, or a stream chunk's delta), as vLLM's RFC #56851 (request
// level text output on /inference/v1/generate, open when this was
// written) proposes. Both answers name their mode in "output_mode".
const (
	outputTokens = "tokens"
	outputText   = "text"
)

// outputMode reads a GenerateRequest's output_mode, raw being its JSON
// value (nil when absent): "tokens" or "text", nothing else (null
// included, the field not being optional); and "text" only while
// sampling_params.detokenize (detokenize, nil when absent: true) is true,
// the rules the RFC above proposes. The simulated engine answers the
// others 400 rather than answering token IDs in a mode the client did not
// ask for.
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
