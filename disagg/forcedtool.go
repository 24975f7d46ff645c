package disagg

import "github.com/kvroute/kvroute/internal/jsonscan"

// toolChoiceMember and typeMember are the members forcesNamedTool reads.
var (
	toolChoiceMember = []string{"tool_choice"}
	typeMember       = []string{"type"}
)

// forcesNamedTool reports whether body, an Anthropic Messages request,
// forces a named tool: tool_choice {"type":"tool","name":…}. vLLM serves
// it as a chat completion with that named tool choice, whose tool call's
// arguments are the generated text as is, and its Messages handler
// decodes them as JSON to build the tool_use block (json.loads in
// AnthropicServingMessages.messages_full_converter, unguarded): the one
// token a prefill request asks for is no JSON object, so vLLM answers the
// prefill 500 and the request is prefilled again locally. The other tool
// choices prefill: "any" becomes "required", whose output vLLM parses
// leniently (an unparsable one is no tool call), and "auto" and "none"
// force nothing. A chat completion naming a function is not affected
// either: vLLM keeps its arguments as text.
//
// body is the request's kvroute.Request.Body as the Profile's hosts hand
// it over (see Profile.Pick): already read as vLLM reads it
// (jsonscan.PythonJSON), a UTF-16 or UTF-32 client body decoded to UTF-8 by
// the gateway's and kvroute-epp's jsonBody; the routing simulator's bodies
// are UTF-8, and outputTokens (render.MaxTokens) reads the same body as
// UTF-8. It is not decoded again here, which would copy a wide body a
// second time outside the hosts' body budgets. One leading UTF-8 byte order
// mark is still read past (jsonscan.TrimBOM, no copy), for a caller that
// passes the body as received. Of a repeated member the last counts; a
// body that is not a JSON object, or that the router got no body for
// (pre-tokenized prompts), forces nothing.
func forcesNamedTool(body []byte) bool {
	if len(body) == 0 {
		return false
	}
	body = jsonscan.TrimBOM(body)
	var v [1][]byte
	if jsonscan.Members(body, toolChoiceMember, v[:]) != nil || len(v[0]) == 0 || v[0][0] != '{' {
		return false
	}
	if jsonscan.Members(v[0], typeMember, v[:]) != nil || len(v[0]) == 0 || v[0][0] != '"' {
		return false
	}
	typ, err := jsonscan.Unquote(v[0])
	return err == nil && typ == "tool"
}
