package server

import (
	"encoding/json"
	"net/http"
)

// Anthropic Messages shapes.
type msgContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type msgUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type msgBody struct {
	ID           string       `json:"id"`
	Type         string       `json:"type"`
	Role         string       `json:"role"`
	Content      []msgContent `json:"content"`
	Model        string       `json:"model"`
	StopReason   *string      `json:"stop_reason"`
	StopSequence *string      `json:"stop_sequence"`
	Usage        msgUsage     `json:"usage"`
	// KVTransferParams is set on a prefiller's answer (pd.go), as vLLM's
	// AnthropicMessagesResponse carries it.
	KVTransferParams *kvTransferParams `json:"kv_transfer_params,omitempty"`
}

// handleMessages serves the Anthropic Messages API, /v1/messages (JSON or SSE
// with Anthropic's event names). max_tokens is required, as in the API. Its
// kv_transfer_params are read as on the OpenAI routes (pd.go), as vLLM's
// Messages API reads them: a prefill-role server answers a do_remote_decode
// request with transfer parameters, a decode-role one reads the blocks a
// do_remote_prefill request names.
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	// max_tokens and the messages' shape are the request model's
	// validation, answered before the handler in vLLM's ErrorResponse; the
	// handler's own errors (model, length) are translated to Anthropic's.
	if req.MaxTokens == nil {
		writeAPIError(w, withParam(badRequest("max_tokens is required"), "max_tokens"))
		return
	}
	sel, e := s.resolveModel(req.Model)
	if e != nil {
		writeAnthropicError(w, e)
		return
	}
	prompt, e := req.prompt()
	s.tok.add(r.URL.Path, 1)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	pd, e := s.pdBegin(r.Context(), req.KVTransferParams, [][]uint32{prompt})
	if e != nil {
		if e.status == http.StatusBadRequest {
			// kv_transfer_params that are not an object: the request
			// model's validation, as max_tokens' above.
			writeAPIError(w, e)
		} else {
			writeAnthropicError(w, e) // the read failed (policy fail) or the client went away
		}
		return
	}
	job, e := s.submitPD([][]uint32{prompt}, req.MaxTokens, nil, sel, pd)
	if e != nil {
		writeAnthropicError(w, e)
		return
	}
	// vLLM serves a message as a chat completion and answers with its id.
	id, model := s.responseID(r, "chatcmpl-", ""), s.modelName(req.Model)
	stop := "max_tokens"
	if !req.Stream {
		rs, err := job.results(r.Context())
		if err != nil {
			writeAnthropicError(w, engineError(err))
			return
		}
		if req.forcesNamedTool() {
			// vLLM serves a named tool choice as a chat completion whose
			// tool call's arguments are the generated text, and builds the
			// tool_use block with json.loads of it, unguarded
			// (messages_full_converter): a generation cut at max_tokens, as
			// every simulated one is, is no JSON object, and the route's
			// catch-all answers 500. The engine ran the request: a
			// prefiller's blocks stay leased for a decoder that never
			// comes, as vLLM keeps them until its abort timeout.
			s.pdFinish(pd, id, job.ids[0], s.pdEngineRequest(prompt, nil, sel.lora))
			writeAnthropicError(w, &apiError{status: http.StatusInternalServerError, typ: "internal_error",
				message: "Expecting value: line 1 column 1 (char 0)"})
			return
		}
		b := msgBody{
			ID: id, Type: "message", Role: "assistant", Content: []msgContent{{Type: "text", Text: rs[0].Text}},
			Model: model, StopReason: &stop, Usage: msgUsage{InputTokens: rs[0].PromptTokens, OutputTokens: len(rs[0].OutputTokens)},
		}
		if pd.produce {
			b.KVTransferParams = s.pdFinish(pd, id, job.ids[0], s.pdEngineRequest(prompt, nil, sel.lora))
		}
		writeJSON(w, http.StatusOK, b)
		return
	}
	out := newSSE(w)
	n := 0
	rs, ok := job.stream(r.Context(), out, func(it genItem) {
		if n == 0 {
			out.send("message_start", map[string]any{"type": "message_start", "message": msgBody{
				ID: id, Type: "message", Role: "assistant", Content: []msgContent{}, Model: model,
				Usage: msgUsage{InputTokens: len(prompt)}}})
			out.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
				"content_block": msgContent{Type: "text"}})
		}
		n++
		out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]string{"type": "text_delta", "text": it.tok.Text}})
	})
	if !ok || rs[0].Err != nil {
		return
	}
	// A streamed answer carries no kv_transfer_params; a prefiller's
	// blocks are held under a lease all the same (openAIJob's
	// transferParams).
	s.pdFinish(pd, id, job.ids[0], s.pdEngineRequest(prompt, nil, sel.lora))
	res := rs[0]
	out.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	out.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": len(res.OutputTokens)}})
	out.send("message_stop", map[string]string{"type": "message_stop"})
}

// CountTokensPath is vLLM's Anthropic token count, which the engine serves
// beside /v1/messages.
const CountTokensPath = "/v1/messages/count_tokens"

// handleCountTokens serves /v1/messages/count_tokens as vLLM does: the
// Messages request's prompt rendered (max_tokens is not required) and its
// tokens counted, {"input_tokens": N}, in Anthropic's error shape for a
// model the engine does not serve; nothing runs, nothing is cached.
func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	if _, e := s.resolveModel(req.Model); e != nil {
		writeAnthropicError(w, e)
		return
	}
	prompt, e := req.prompt()
	s.tok.add(r.URL.Path, 1)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(prompt)})
}

// anthropicErrorBody is vLLM's AnthropicErrorResponse: what its
// /v1/messages answers for an error its handler returns, the
// ErrorResponse's type and message under Anthropic's envelope, with the
// ErrorResponse's status.
type anthropicErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeAnthropicError(w http.ResponseWriter, e *apiError) {
	b := anthropicErrorBody{Type: "error"}
	b.Error.Type, b.Error.Message = e.typ, e.message
	writeJSON(w, e.status, b)
}

// forcesNamedTool reports whether the request's tool_choice names a tool
// ({"type":"tool","name":…}), which vLLM serves as a chat completion with
// a named tool choice.
func (r *messagesRequest) forcesNamedTool() bool {
	var tc struct {
		Type string `json:"type"`
	}
	return !isNull(r.ToolChoice) && json.Unmarshal(r.ToolChoice, &tc) == nil && tc.Type == "tool"
}
