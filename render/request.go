package render

import (
	"slices"
	"strconv"
	"strings"
)

// API names the inference API a request body belongs to.
type API string

const (
	// APICompletions is OpenAI /v1/completions; it renders one prompt per
	// entry of "prompt".
	APICompletions API = "completions"
	// APIChatCompletions is OpenAI /v1/chat/completions.
	APIChatCompletions API = "chat_completions"
	// APIMessages is Anthropic /v1/messages.
	APIMessages API = "messages"
	// APIResponses is OpenAI /v1/responses.
	APIResponses API = "responses"
)

// APIForPath maps an inference path (such as "/v1/chat/completions") to its
// API, so that a gateway can pass through what it received.
func APIForPath(path string) (API, bool) {
	switch strings.TrimRight(path, "/") {
	case "/v1/completions":
		return APICompletions, true
	case "/v1/chat/completions":
		return APIChatCompletions, true
	case "/v1/messages":
		return APIMessages, true
	case "/v1/responses":
		return APIResponses, true
	}
	return "", false
}

type route int

const (
	routeCompletions route = iota
	routeChat
	routeMessages
	routeResponses
	numRoutes
)

var routePaths = [numRoutes]string{
	routeCompletions: "/v1/completions/render",
	routeChat:        "/v1/chat/completions/render",
	routeMessages:    "/v1/messages/render",
	routeResponses:   "/v1/responses/render",
}

func (a API) route() (route, bool) {
	switch a {
	case APICompletions:
		return routeCompletions, true
	case APIChatCompletions:
		return routeChat, true
	case APIMessages:
		return routeMessages, true
	case APIResponses:
		return routeResponses, true
	}
	return 0, false
}

// Request is one request to render.
type Request struct {
	// API is the inference API the body belongs to.
	API API
	// Body is the client's JSON body as received. It is not modified; the
	// render copy gets the edits of Config.PrefillOnly and Config.OmitMMKwargs.
	Body []byte
	// Authorization is the inbound Authorization header, forwarded verbatim
	// ("" sends none).
	Authorization string
	// Model is the model the request targets, for a Client whose endpoints
	// serve different models: it is rendered only by endpoints listing it
	// in Endpoint.Models (or listing none), and a Messages or Responses
	// body translated for an engine without the native route names it.
	// "" renders on any endpoint as Config.ModelName.
	Model string
	// KeepTokenJSON asks to keep, beside each prompt's token IDs, the
	// renderer's own bytes of them when they are exactly what
	// Prompt.AppendTokenJSON writes, so that a caller forwarding the IDs as
	// JSON (tokenize-once) copies them instead of formatting them again. It
	// changes no result; off, AppendTokenJSON writes the IDs.
	KeepTokenJSON bool
}

// span is a byte range [start, end) of a body.
type span struct{ start, end int }

// topFields is what the edits and the salt need from a body's top level.
type topFields struct {
	end                 int    // index of the closing '}'
	members             int    // number of top-level members
	maxTokens           []span // every occurrence (duplicates are possible)
	maxCompletionTokens []span
	maxOutputTokens     []span // the Responses API's output cap
	minTokens           []span
	truncateSet         bool // truncate_prompt_tokens present and not null
	salt                string
	hasSalt             bool
	// promptCount and embedsCount are the prompts of a completions body's
	// prompt and prompt_embeds (countPrompts; the last of duplicate keys).
	promptCount, embedsCount int
}

// prompts returns how many prompts a completions body asks to render, at
// least 1: an answer with more is not the request's.
func (f *topFields) prompts() int { return max(1, f.promptCount+f.embedsCount) }

// countPrompts returns the prompts of a completions prompt or prompt_embeds
// value, which skipValue has validated: a list of strings, of token-ID lists
// or of embeddings holds one per entry, a string or a token-ID list is one,
// null none.
func countPrompts(v []byte) int {
	switch v[0] {
	case 'n':
		return 0
	case '[':
	default:
		return 1
	}
	s := scanner{b: v, i: 1}
	s.ws()
	if s.consume(']') {
		return 0
	}
	if c := s.peek(); c == '-' || c >= '0' && c <= '9' {
		return 1 // one prompt's token IDs
	}
	n := 0
	for {
		s.ws()
		if s.skipValue(1) != nil {
			return n
		}
		n++
		s.ws()
		if !s.consume(',') {
			return n
		}
	}
}

// scanTop reads the top-level members of a JSON object body without decoding
// nested values.
func scanTop(body []byte) (topFields, error) {
	var f topFields
	s := scanner{b: body}
	s.ws()
	if !s.consume('{') {
		return f, s.errorf("body is not a JSON object")
	}
	s.ws()
	if s.consume('}') {
		f.end = s.i - 1
		return f, s.trailer()
	}
	for {
		s.ws()
		key, err := s.rawKey()
		if err != nil {
			return f, err
		}
		s.ws()
		if !s.consume(':') {
			return f, s.errorf("expected ':'")
		}
		s.ws()
		start := s.i
		if err := s.skipValue(0); err != nil {
			return f, err
		}
		v := span{start, s.i}
		f.members++
		switch string(key) {
		case "max_tokens":
			f.maxTokens = append(f.maxTokens, v)
		case "max_completion_tokens":
			f.maxCompletionTokens = append(f.maxCompletionTokens, v)
		case "max_output_tokens":
			f.maxOutputTokens = append(f.maxOutputTokens, v)
		case "min_tokens":
			f.minTokens = append(f.minTokens, v)
		case "prompt":
			f.promptCount = countPrompts(body[v.start:v.end])
		case "prompt_embeds":
			f.embedsCount = countPrompts(body[v.start:v.end])
		case "truncate_prompt_tokens":
			f.truncateSet = string(body[v.start:v.end]) != "null"
		case "cache_salt":
			f.salt, f.hasSalt = "", false
			if body[v.start] == '"' {
				if str, err := unquote(body[v.start:v.end]); err == nil && str != "" {
					f.salt, f.hasSalt = str, true
				}
			}
		}
		s.ws()
		if s.consume(',') {
			continue
		}
		if s.consume('}') {
			f.end = s.i - 1
			return f, s.trailer()
		}
		return f, s.errorf("expected ',' or '}'")
	}
}

// edit replaces body[at] with text.
type edit struct {
	at   span
	text string
}

// prepareBody returns the render copy of body with the configured edits, and
// the request's cache salt, as one slice (body itself when nothing is
// edited). The body itself is never modified.
func prepareBody(body []byte, prefillOnly, omitMMKwargs bool) (out []byte, salt string, hasSalt bool, err error) {
	w, salt, hasSalt, err := prepareWire(body, prefillOnly, omitMMKwargs)
	if err != nil {
		return nil, "", false, err
	}
	return w.bytes(), salt, hasSalt, nil
}

// prepareWire returns the render copy of body with the configured edits as
// the parts it is made of (ranges of body and the edits' literals), and the
// request's cache salt. Nothing is copied until the body is sent; an edit
// to the value already there is none, so such a body goes out as it came.
// The body itself is never modified.
func prepareWire(body []byte, prefillOnly, omitMMKwargs bool) (w wireBody, salt string, hasSalt bool, err error) {
	return prepareWireFor(routeCompletions, body, prefillOnly, omitMMKwargs)
}

// prepareWireFor is prepareWire for a body sent to route r. PrefillOnly caps
// the output in the API's own members: a Responses body's is
// max_output_tokens (capped at 1 when above, nothing added when absent: the
// engine then asks for the context's rest, which fits), every other API's
// max_tokens (set to 1, added when absent), max_completion_tokens and
// min_tokens.
func prepareWireFor(r route, body []byte, prefillOnly, omitMMKwargs bool) (w wireBody, salt string, hasSalt bool, err error) {
	f, err := scanTop(body)
	if err != nil {
		return wireBody{}, "", false, err
	}
	var edits []edit
	var appendix []string
	capAt1 := func(spans []span) {
		for _, v := range spans {
			raw := string(body[v.start:v.end])
			if raw == "null" {
				continue
			}
			if x, err := strconv.ParseFloat(raw, 64); err == nil && x <= 1 {
				continue
			}
			edits = append(edits, edit{v, "1"})
		}
	}
	if prefillOnly && !f.truncateSet && r == routeResponses {
		capAt1(f.maxOutputTokens)
	} else if prefillOnly && !f.truncateSet {
		if len(f.maxTokens) == 0 {
			appendix = append(appendix, `"max_tokens":1`)
		}
		for _, v := range f.maxTokens {
			edits = append(edits, edit{v, "1"})
		}
		capAt1(f.maxCompletionTokens)
		for _, v := range f.minTokens {
			edits = append(edits, edit{v, "0"})
		}
	}
	if omitMMKwargs {
		appendix = append(appendix, `"return_mm_kwargs":false`)
	}
	// An edit to the value already there is none.
	edits = slices.DeleteFunc(edits, func(e edit) bool { return string(body[e.at.start:e.at.end]) == e.text })
	if len(edits) == 0 && len(appendix) == 0 {
		w = wholeBody(body)
		w.prompts = f.prompts()
		return w, f.salt, f.hasSalt, nil
	}
	w.prompts = f.prompts()
	// Edits are in key order, which is byte order.
	sortEdits(edits)
	pos := 0
	for _, e := range edits {
		w.add(body[pos:e.at.start])
		w.add(literal(e.text))
		pos = e.at.end
	}
	w.add(body[pos:f.end])
	members := f.members
	for _, a := range appendix {
		if members > 0 {
			w.add(literal(","))
		}
		w.add(literal(a))
		members++
	}
	w.add(body[f.end:])
	return w, f.salt, f.hasSalt, nil
}

// literal returns the bytes of an edit's text. The texts are the constants
// above, so they are interned once rather than converted per request.
func literal(s string) []byte {
	if b, ok := literals[s]; ok {
		return b
	}
	return []byte(s)
}

var literals = func() map[string][]byte {
	m := map[string][]byte{}
	for _, s := range []string{"1", "0", ",", `"max_tokens":1`, `"return_mm_kwargs":false`} {
		m[s] = []byte(s)
	}
	return m
}()

// sortEdits orders edits by position (insertion sort: there are at most a
// handful).
func sortEdits(es []edit) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].at.start < es[j-1].at.start; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}
