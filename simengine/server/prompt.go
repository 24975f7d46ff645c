package server

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/kvroute/kvroute/simengine"
)

// This file turns the request bodies of the four APIs into prompt tokens with
// the engine's tokenizer and chat template. Render and generation share it, so
// a render call returns exactly the tokens the engine hashes.

// compact returns the compact JSON of raw (for non-text content, tools).
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// contentText flattens message content: a string; or an array of parts whose
// text parts ("text", "input_text", "output_text") contribute their text and
// any other part its compact JSON, joined by newlines.
func contentText(raw json.RawMessage) (string, *apiError) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest("message content must be a string or an array of content parts")
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		var part struct {
			Type    string          `json:"type"`
			Text    *string         `json:"text"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(p, &part) != nil {
			return "", badRequest("content parts must be objects")
		}
		switch {
		case (part.Type == "text" || part.Type == "input_text" || part.Type == "output_text") && part.Text != nil:
			texts = append(texts, *part.Text)
		case part.Type == "tool_result": // Anthropic: the result's own content
			t, e := contentText(part.Content)
			if e != nil {
				return "", e
			}
			texts = append(texts, t)
		default:
			texts = append(texts, compact(p))
		}
	}
	return strings.Join(texts, "\n"), nil
}

func tokenize(msgs []simengine.Message, tools json.RawMessage, addGen bool) ([]uint32, *apiError) {
	var t string
	if !isNull(tools) && string(bytes.TrimSpace(tools)) != "[]" {
		t = compact(tools)
	}
	ids, err := simengine.ApplyChatTemplate(nil, msgs, t, addGen)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	if len(ids) == 0 {
		return nil, badRequest("No token_ids rendered")
	}
	return ids, nil
}

// chatRequest is the part of an OpenAI ChatCompletionRequest the engine uses.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	CacheSalt           *string         `json:"cache_salt"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	// Priority is only checked, and echoed by the render route
	// (renderEcho).
	Priority         pyInt           `json:"priority"`
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`
	// RequestID is vLLM's extra parameter: the response's id after
	// "chatcmpl-" when no X-Request-Id header sets it (requestid.go).
	RequestID string `json:"request_id"`
}

func (r *chatRequest) cacheSalt() *string { return r.CacheSalt }

type chatMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

func (r *chatRequest) prompt() ([]uint32, *apiError) {
	if len(r.Messages) == 0 {
		return nil, withParam(badRequest("messages must not be empty"), "messages")
	}
	msgs := make([]simengine.Message, 0, len(r.Messages))
	for _, m := range r.Messages {
		text, e := contentText(m.Content)
		if e != nil {
			return nil, e
		}
		if !isNull(m.ToolCalls) {
			text += compact(m.ToolCalls)
		}
		msgs = append(msgs, simengine.Message{Role: m.Role, Content: text})
	}
	return tokenize(msgs, r.Tools, r.AddGenerationPrompt == nil || *r.AddGenerationPrompt)
}

func (r *chatRequest) maxTokens(def int) *int {
	if r.MaxCompletionTokens != nil {
		return r.MaxCompletionTokens
	}
	if r.MaxTokens != nil {
		return r.MaxTokens
	}
	return &def
}

// completionRequest is the part of an OpenAI CompletionRequest the engine uses.
type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int            `json:"max_tokens"`
	N             *int            `json:"n"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	CacheSalt     *string         `json:"cache_salt"`
	// Priority is only checked, and echoed by the render route
	// (renderEcho).
	Priority pyInt `json:"priority"`
	// KVTransferParams are vLLM's P/D fields (pd.go).
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`
	// RequestID is vLLM's extra parameter: the response's id after "cmpl-"
	// when no X-Request-Id header sets it (requestid.go).
	RequestID string `json:"request_id"`

	texts int // prompts that prompts() tokenized from text
	// ids is the prompt's token IDs when decodeCompletion parsed them
	// already (Prompt then holds their JSON).
	ids []uint32
}

func (r *completionRequest) cacheSalt() *string { return r.CacheSalt }

// prompts parses prompt: a string, a list of strings, a list of token IDs or a
// list of token-ID lists, tried in that order and token IDs read by
// pydantic's lax rules (laxTokenIDs), as vLLM's union of those types reads
// it. Each prompt is tokenized without a template.
func (r *completionRequest) prompts() ([][]uint32, *apiError) {
	bad := withParam(badRequest("prompt must be a string, a list of strings, a list of token IDs or a list of token-ID lists"), "prompt")
	raw := bytes.TrimSpace(r.Prompt)
	var out [][]uint32
	var one string
	var many []string
	var ids []uint32
	var lists []laxTokenIDs
	switch {
	case isNull(raw):
		return nil, withParam(badRequest("prompt is required"), "prompt")
	case r.ids != nil:
		out = [][]uint32{r.ids}
	case parseTokenList(raw, &ids): // the common token-in shape, without reflection (tokenin.go)
		out = [][]uint32{ids}
	case json.Unmarshal(raw, &one) == nil:
		out, r.texts = [][]uint32{simengine.Tokenize(nil, one)}, 1
	case json.Unmarshal(raw, &many) == nil && len(many) > 0:
		for _, p := range many {
			out = append(out, simengine.Tokenize(nil, p))
		}
		r.texts = len(many)
	case json.Unmarshal(raw, (*laxTokenIDs)(&ids)) == nil && len(ids) > 0:
		out = [][]uint32{ids}
	case json.Unmarshal(raw, &lists) == nil && len(lists) > 0:
		for _, l := range lists {
			if l == nil {
				return nil, bad
			}
			out = append(out, l)
		}
	default:
		return nil, bad
	}
	for _, p := range out {
		if len(p) == 0 {
			return nil, withParam(badRequest("No token_ids rendered: the prompt is empty"), "prompt")
		}
	}
	return out, nil
}

// messagesRequest is the part of an Anthropic Messages request the engine uses.
type messagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens *int            `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []chatMessage   `json:"messages"`
	Tools     json.RawMessage `json:"tools"`
	// ToolChoice is read for one thing: a named tool ({"type":"tool"}),
	// whose output vLLM decodes as the tool call's JSON input
	// (anthropic.go, forcesNamedTool).
	ToolChoice json.RawMessage `json:"tool_choice"`
	Stream     bool            `json:"stream"`
	// No cache_salt: vLLM's AnthropicMessagesRequest has none (it drops the
	// key) and its chat translation sets none, so a Messages prompt is
	// cached unsalted.

	// KVTransferParams are vLLM's P/D fields (pd.go), which its
	// AnthropicMessagesRequest carries into the chat completion it serves
	// the message as.
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`
}

func (r *messagesRequest) prompt() ([]uint32, *apiError) {
	if len(r.Messages) == 0 {
		return nil, withParam(badRequest("messages must not be empty"), "messages")
	}
	var msgs []simengine.Message
	if !isNull(r.System) {
		sys, e := contentText(r.System)
		if e != nil {
			return nil, e
		}
		msgs = append(msgs, simengine.Message{Role: "system", Content: sys})
	}
	for _, m := range r.Messages {
		text, e := contentText(m.Content)
		if e != nil {
			return nil, e
		}
		msgs = append(msgs, simengine.Message{Role: m.Role, Content: text})
	}
	return tokenize(msgs, r.Tools, true)
}

// responsesRequest is the part of an OpenAI Responses request the engine uses.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Tools              json.RawMessage `json:"tools"`
	Stream             bool            `json:"stream"`
	PreviousResponseID *string         `json:"previous_response_id"`
	CacheSalt          *string         `json:"cache_salt"`
	// KVTransferParams are vLLM's P/D fields (pd.go), which its
	// ResponsesRequest carries as ChatCompletionRequest does.
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`
	// RequestID is vLLM's extra parameter, the response's whole id (vLLM
	// reads no X-Request-Id here; requestid.go).
	RequestID string `json:"request_id"`
}

func (r *responsesRequest) cacheSalt() *string { return r.CacheSalt }

func (r *responsesRequest) prompt() ([]uint32, *apiError) {
	if r.PreviousResponseID != nil {
		return nil, withParam(&apiError{status: 400, typ: typeInvalid,
			message: "previous_response_id is not supported: the simulated engine stores no responses"}, "previous_response_id")
	}
	var msgs []simengine.Message
	if r.Instructions != nil {
		msgs = append(msgs, simengine.Message{Role: "system", Content: *r.Instructions})
	}
	var s string
	var items []json.RawMessage
	switch {
	case isNull(r.Input):
		return nil, withParam(badRequest("input is required"), "input")
	case json.Unmarshal(r.Input, &s) == nil:
		msgs = append(msgs, simengine.Message{Role: "user", Content: s})
	case json.Unmarshal(r.Input, &items) == nil:
		for _, it := range items {
			var item struct {
				Type    string          `json:"type"`
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			}
			if json.Unmarshal(it, &item) != nil {
				return nil, withParam(badRequest("input items must be objects"), "input")
			}
			if item.Role == "" { // function_call, function_call_output, reasoning, …
				msgs = append(msgs, simengine.Message{Role: "tool", Content: compact(it)})
				continue
			}
			text, e := contentText(item.Content)
			if e != nil {
				return nil, e
			}
			msgs = append(msgs, simengine.Message{Role: item.Role, Content: text})
		}
	default:
		return nil, withParam(badRequest("input must be a string or a list of items"), "input")
	}
	return tokenize(msgs, r.Tools, true)
}
