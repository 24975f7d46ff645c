package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/jsonscan"
	"github.com/kvroute/kvroute/render"
)

// Tokenize once: the router renders (tokenizes) a request to route it, and
// the engine would tokenize the same text again. For an API whose engine
// route takes the prompt as token IDs and answers exactly as it would for the
// text, the gateway forwards the rendered token IDs instead, so the prompt is
// tokenized once. That holds for OpenAI completions: vLLM's
// CompletionRequest takes "prompt" as a list of token IDs (or a list of such
// lists) and builds the same response from them. It does not hold for chat
// completions, Messages or Responses: their vLLM schemas have no token-ID
// prompt, and vLLM's only token-in generation route (/inference/v1/generate)
// answers with token IDs (and, in its "text" output mode, their plain
// text), not a message with tool calls or reasoning, in chunks of another
// shape, so forwarding there would change what the client receives.
// Those APIs keep forwarding the body.

// tokenInAPIs checks Config.TokenizeOnce and returns the set it names.
func tokenInAPIs(list []render.API) (map[render.API]bool, error) {
	set := map[render.API]bool{}
	for _, a := range list {
		switch a {
		case render.APICompletions:
			set[a] = true
		case render.APIChatCompletions, render.APIMessages, render.APIResponses:
			return nil, fmt.Errorf("gateway: tokenizeOnce cannot include %q: the engine takes no token-ID prompt on that API with the same response (only completions qualifies)", a)
		default:
			return nil, fmt.Errorf("gateway: tokenizeOnce names unknown API %q (want %q)", a, render.APICompletions)
		}
	}
	return set, nil
}

// promptKind is what a completions body's "prompt" holds.
type promptKind uint8

const (
	promptOther    promptKind = iota // absent, token IDs already, or anything else: left alone
	promptText                       // one string
	promptTextList                   // a list of strings
)

// completionsPrompt finds the top-level "prompt" of a completions body (the
// last one when repeated, as vLLM's parser keeps), its span [vs, ve), what it
// holds and, for a list, how many strings. ok is false when the body must be
// forwarded as it came: "echo" set (vLLM echoes a token-ID prompt as its
// detokenized text, which need not be the client's text byte for byte),
// "prompt_embeds" present, or a body the scan does not accept. The body was
// validated as a JSON object already (bodyModel).
func completionsPrompt(body []byte) (vs, ve int, kind promptKind, n int, ok bool) {
	s := jsonscan.Scanner{Buf: body}
	s.WS()
	if !s.Consume('{') {
		return 0, 0, promptOther, 0, false
	}
	s.WS()
	if s.Consume('}') {
		return 0, 0, promptOther, 0, false
	}
	for {
		s.WS()
		ks := s.Pos
		esc, err := s.SkipString()
		if err != nil {
			return 0, 0, promptOther, 0, false
		}
		key := string(body[ks:s.Pos])
		if esc {
			var k string
			if json.Unmarshal(body[ks:s.Pos], &k) != nil {
				return 0, 0, promptOther, 0, false
			}
			key = strconv.Quote(k)
		}
		s.WS()
		if !s.Consume(':') {
			return 0, 0, promptOther, 0, false
		}
		s.WS()
		start := s.Pos
		if err := s.SkipValue(2, maxScanDepth, math.MaxInt); err != nil {
			return 0, 0, promptOther, 0, false
		}
		v := body[start:s.Pos]
		switch key {
		case `"prompt"`:
			vs, ve = start, s.Pos
			kind, n = classifyPrompt(v)
		case `"echo"`, `"prompt_embeds"`:
			if string(v) != "false" && string(v) != "null" {
				return 0, 0, promptOther, 0, false
			}
		}
		s.WS()
		if s.Consume(',') {
			continue
		}
		if s.Consume('}') {
			return vs, ve, kind, n, kind != promptOther
		}
		return 0, 0, promptOther, 0, false
	}
}

// classifyPrompt tells a prompt value that is text (one string, or a
// non-empty list of strings, with their count) from anything else.
func classifyPrompt(v []byte) (promptKind, int) {
	s := jsonscan.Scanner{Buf: v}
	if s.Peek() == '"' {
		return promptText, 1
	}
	if !s.Consume('[') {
		return promptOther, 0
	}
	n := 0
	for {
		s.WS()
		if s.Peek() != '"' {
			return promptOther, 0
		}
		if _, err := s.SkipString(); err != nil {
			return promptOther, 0
		}
		n++
		s.WS()
		if s.Consume(',') {
			continue
		}
		if s.Consume(']') {
			return promptTextList, n
		}
		return promptOther, 0
	}
}

// tokenBody returns body with its text prompt replaced by the rendered token
// IDs (one list for one prompt, a list of lists for several), every other
// byte as it came; ok is false, and body should go as it came, when the
// prompt is not text, the rendered prompts do not match it one for one, or
// any has multimodal features (completions has none in vLLM; a render that
// reports some is not one the engine would reproduce from IDs alone).
func tokenBody(body []byte, prompts []render.Prompt) ([]byte, bool) {
	return appendTokenBody(nil, body, prompts)
}

// appendTokenBody is tokenBody writing into dst's array (from its start)
// when it is large enough, into a new one of the exact size otherwise.
func appendTokenBody(dst, body []byte, prompts []render.Prompt) ([]byte, bool) {
	vs, ve, kind, n, ok := completionsPrompt(body)
	if !ok || n != len(prompts) {
		return nil, false
	}
	size := len(body) - (ve - vs) + 2
	for i := range prompts {
		if len(prompts[i].TokenIDs) == 0 || prompts[i].Features != nil {
			return nil, false
		}
		size += 1 + prompts[i].TokenJSONLen()
	}
	out := dst[:0]
	if cap(out) < size {
		out = make([]byte, 0, size)
	}
	out = append(out, body[:vs]...)
	if kind == promptTextList {
		out = append(out, '[')
	}
	for i := range prompts {
		if i > 0 {
			out = append(out, ',')
		}
		// The renderer's own bytes when it wrote the IDs compact, as
		// jsonids would: a copy instead of formatting them again.
		out = prompts[i].AppendTokenJSON(out)
	}
	if kind == promptTextList {
		out = append(out, ']')
	}
	return append(out, body[ve:]...), true
}

// forwardBody is the body to forward for d: the token-ID body when the
// request's API forwards tokens (d carries Prompts only then) and the
// gateway-wide body budget has room for it, else body itself. held is what
// it took of the budget, released by the caller after the response. pooled,
// when not nil, is the recycled array the token-ID body was written into,
// which the caller hands back with recycleTokenBody once forward has
// returned.
func (h *Handler) forwardBody(body []byte, d *kvroute.Decision) (fwd []byte, held int64, pooled *[]byte) {
	if len(d.Prompts) == 0 {
		return body, 0, nil
	}
	var dst []byte
	if h.recyclable(d) {
		if pooled, _ = tokenBodies.Get().(*[]byte); pooled == nil {
			pooled = new([]byte)
		}
		dst = *pooled
	}
	tb, ok := appendTokenBody(dst, body, d.Prompts)
	if !ok || !h.budget.Acquire(int64(cap(tb))) {
		if pooled != nil {
			tokenBodies.Put(pooled)
		}
		return body, 0, nil
	}
	if pooled != nil {
		*pooled = tb[:0]
	}
	return tb, int64(cap(tb)), pooled
}

// tokenBodies holds the arrays of forwarded token-ID bodies (*[]byte) for
// later requests: about 12 KB per 2,000-token prompt, otherwise a fifth of
// what the gateway allocates per tokenize-once request.
var tokenBodies sync.Pool

// maxPooledTokenBody bounds the arrays tokenBodies keeps: a rare huge
// prompt's does not stay pinned.
const maxPooledTokenBody = 1 << 20

// recyclable reports whether the body forwarded for d is certainly no
// longer read once forward has returned, so its array may serve a later
// request: it goes to a host:port endpoint by plain HTTP through the
// Handler's own transport (which writes the body on the calling goroutine
// and is done with it when RoundTrip returns; net/http's Transport, used for
// other schemes or injected, may still be writing it), without a prefill
// step (whose exchange may send it elsewhere).
func (h *Handler) recyclable(d *kvroute.Decision) bool {
	return h.ownsTr != nil && h.transport == h.ownsTr && d.Endpoint.Address == "" && len(d.Roles) == 0
}

// recycleTokenBody hands a forwarded token-ID body's array back to
// tokenBodies; nothing when pooled is nil.
func recycleTokenBody(pooled *[]byte) {
	if pooled != nil && cap(*pooled) <= maxPooledTokenBody {
		tokenBodies.Put(pooled)
	}
}
