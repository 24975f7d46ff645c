package server

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/kvroute/kvroute/internal/jsonscan"
)

// streamOptions is vLLM's StreamOptions, the stream_options of the
// completions, chat completions and token-in requests, echoed by the
// render routes. Both members are optional booleans with defaults:
// include_usage true and continuous_usage_stats false when absent, null
// (nil here) when the request says null. A request's stream_options of {}
// therefore asks for the usage chunk, as it does of vLLM.
type streamOptions struct {
	IncludeUsage         *bool `json:"include_usage"`
	ContinuousUsageStats *bool `json:"continuous_usage_stats"`
}

// UnmarshalJSON reads stream_options with vLLM's defaults for the members
// it does not give.
func (o *streamOptions) UnmarshalJSON(b []byte) error {
	type plain streamOptions
	yes, no := true, false
	p := plain{IncludeUsage: &yes, ContinuousUsageStats: &no}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*o = streamOptions(p)
	return nil
}

// includeUsage reports whether o (nil: no stream_options) asks for the
// usage chunk that ends a stream.
func (o *streamOptions) includeUsage() bool {
	return o != nil && o.IncludeUsage != nil && *o.IncludeUsage
}

// streamChecked marks the request models that carry vLLM's
// validate_stream_options: completions and chat completions, on their
// generation and render routes alike.
type streamChecked interface{ checksStreamOptions() }

func (*completionRequest) checksStreamOptions() {}
func (*chatRequest) checksStreamOptions()       {}

// streamOptionsName is the member checkStreamOptions looks for, as it
// stands in a body whose member names hold no escape.
var streamOptionsName = []byte("stream_options")

// streamMembers are the members checkStreamOptions reads.
var streamMembers = []string{"stream", "stream_options"}

// errStreamOptions is vLLM's refusal of stream options on a request that
// does not stream.
const errStreamOptions = "Stream options can only be defined when `stream=True`."

// checkStreamOptions refuses, as vLLM's completions and chat completions
// request models do before they read any field's type, a body of a
// streamChecked request v whose stream_options is set while stream is not,
// both tested by Python's truth value of the raw JSON (a non-empty object
// is set, {} and null are not). Without it the simulated engine served
// with 200 what vLLM answers 400, on the render routes too.
func checkStreamOptions(v any, body []byte) *apiError {
	if _, ok := v.(streamChecked); !ok {
		return nil
	}
	if !bytes.Contains(body, streamOptionsName) && bytes.IndexByte(body, '\\') < 0 {
		return nil // no member named stream_options, literally or escaped
	}
	var m [2][]byte
	if jsonscan.Members(body, streamMembers, m[:]) != nil {
		return nil // not an object: the decoder refuses it
	}
	if truthy(m[1]) && !truthy(m[0]) {
		return withParam(badRequest("%s", errStreamOptions), "stream_options")
	}
	return nil
}

// truthy is Python's truth value of the JSON value v (nil: absent, false):
// null, false, zero, "", [] and {} are false, everything else true.
func truthy(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	switch v[0] {
	case 'n', 'f':
		return false
	case 't':
		return true
	case '"':
		return len(v) > 2
	case '[', '{':
		s := jsonscan.Scanner{Buf: v, Pos: 1}
		s.WS()
		return s.Pos < len(v) && v[s.Pos] != ']' && v[s.Pos] != '}'
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return err != nil || f != 0
}
