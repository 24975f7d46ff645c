package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/kvroute/kvroute/internal/modelcard"
)

// samplingParams mirrors the main fields of vLLM's SamplingParams as the
// render routes serialize them (model_dump_json: nulls present).
type samplingParams struct {
	N                         int      `json:"n"`
	PresencePenalty           float64  `json:"presence_penalty"`
	FrequencyPenalty          float64  `json:"frequency_penalty"`
	RepetitionPenalty         float64  `json:"repetition_penalty"`
	Temperature               float64  `json:"temperature"`
	TopP                      float64  `json:"top_p"`
	TopK                      int      `json:"top_k"`
	MinP                      float64  `json:"min_p"`
	Seed                      *int     `json:"seed"`
	Stop                      []string `json:"stop"`
	StopTokenIDs              []int    `json:"stop_token_ids"`
	IgnoreEOS                 bool     `json:"ignore_eos"`
	MaxTokens                 int      `json:"max_tokens"`
	MinTokens                 int      `json:"min_tokens"`
	Logprobs                  *int     `json:"logprobs"`
	PromptLogprobs            *int     `json:"prompt_logprobs"`
	SkipSpecialTokens         bool     `json:"skip_special_tokens"`
	SpacesBetweenSpecialToken bool     `json:"spaces_between_special_tokens"`
	TruncatePromptTokens      *int     `json:"truncate_prompt_tokens"`
	SkipReadingPrefixCache    *bool    `json:"skip_reading_prefix_cache"`
	ExtraArgs                 any      `json:"extra_args"`
}

// generateRequest is vLLM's GenerateRequest, the body of every render response.
type generateRequest struct {
	RequestID             string         `json:"request_id"`
	TokenIDs              []uint32       `json:"token_ids"`
	TokenOffsets          any            `json:"token_offsets"`
	Features              any            `json:"features"`
	ContentParts          any            `json:"content_parts"`
	SamplingParams        samplingParams `json:"sampling_params"`
	Model                 string         `json:"model"`
	ReasoningEnded        any            `json:"reasoning_ended"`
	ReasoningParserKwargs any            `json:"reasoning_parser_kwargs"`
	ReturnTokenIDs        bool           `json:"return_token_ids"`
	OutputMode            string         `json:"output_mode"`
	Stream                bool           `json:"stream"`
	StreamOptions         *streamOptions `json:"stream_options"`
	CacheSalt             *string        `json:"cache_salt"`
	Priority              pyInt          `json:"priority"`
	KVTransferParams      any            `json:"kv_transfer_params"`
	ECTransferParams      any            `json:"ec_transfer_params"`
}

// renderEcho is what vLLM's render copies from a completions or chat
// completions request into its GenerateRequest beside the prompt: its
// priority, and its stream_options when it streams (none otherwise). A
// router that sends the rendered request on to the token-in route sends
// what it finds there.
type renderEcho struct {
	priority      pyInt
	streamOptions *streamOptions
}

func (s *Server) generateRequest(id string, tokens []uint32, maxTokens *int, model string, salt *string, stream bool, echo renderEcho) generateRequest {
	mt := s.cfg.DefaultMaxTokens
	if maxTokens != nil {
		mt = *maxTokens
	}
	opts := echo.streamOptions
	if !stream {
		opts = nil
	}
	return generateRequest{
		RequestID: id, TokenIDs: tokens, Model: s.renderedModel(model), CacheSalt: salt, OutputMode: "tokens", Stream: stream,
		StreamOptions: opts, Priority: echo.priority,
		SamplingParams: samplingParams{N: 1, RepetitionPenalty: 1, Temperature: 1, TopP: 1, MaxTokens: mt,
			Stop: []string{}, StopTokenIDs: []int{}, SkipSpecialTokens: true, SpacesBetweenSpecialToken: true},
	}
}

// checkRenderLength rejects prompts longer than the context, as vLLM's
// renderer does.
func (s *Server) checkRenderLength(tokens []uint32) *apiError {
	if len(tokens) > s.cfg.MaxModelLen {
		return badRequest("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.",
			s.cfg.MaxModelLen, len(tokens))
	}
	return nil
}

// handleCompletionsRender serves /v1/completions/render: a JSON array of
// GenerateRequest, one per prompt.
func (s *Server) handleCompletionsRender(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	_, e := s.resolveModel(req.Model)
	var prompts [][]uint32
	if e == nil {
		prompts, e = req.prompts()
		s.tok.add(r.URL.Path, req.texts)
	}
	out := make([]generateRequest, 0, len(prompts))
	id := s.requestID("cmpl-")
	tokens := 0
	for i, p := range prompts {
		if e = s.checkRenderLength(p); e != nil {
			break
		}
		tokens += len(p)
		out = append(out, s.generateRequest(id+"-"+strconv.Itoa(i), p, req.MaxTokens, req.Model, req.CacheSalt, req.Stream,
			renderEcho{req.Priority, req.StreamOptions}))
	}
	if e != nil {
		writeAPIError(w, e)
		return
	}
	if !s.saturate(w, r, tokens) {
		return
	}
	writeRender(w, out, true)
}

// renderOne finishes the single-object render routes: it checks the model,
// then renders the prompt, as vLLM does.
func (s *Server) renderOne(w http.ResponseWriter, r *http.Request, model, prefix string, prompt func() ([]uint32, *apiError), maxTokens *int, salt *string, stream bool, echo renderEcho) {
	var tokens []uint32
	_, e := s.resolveModel(model)
	if e == nil {
		tokens, e = prompt()
		s.tok.add("render", 1)
	}
	if e == nil {
		e = s.checkRenderLength(tokens)
	}
	if e != nil {
		writeAPIError(w, e)
		return
	}
	if !s.saturate(w, r, len(tokens)) {
		return
	}
	writeRender(w, []generateRequest{s.generateRequest(s.requestID(prefix), tokens, maxTokens, model, salt, stream, echo)}, false)
}

// handleChatRender serves /v1/chat/completions/render: one GenerateRequest.
func (s *Server) handleChatRender(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	s.renderOne(w, r, req.Model, "chatcmpl-", req.prompt, req.maxTokens(s.cfg.DefaultMaxTokens), req.CacheSalt, req.Stream,
		renderEcho{req.Priority, req.StreamOptions})
}

// handleMessagesRender serves /v1/messages/render: one GenerateRequest.
func (s *Server) handleMessagesRender(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	s.renderOne(w, r, req.Model, "chatcmpl-", req.prompt, req.MaxTokens, nil, req.Stream, renderEcho{})
}

// handleResponsesRender serves /v1/responses/render: one GenerateRequest;
// previous_response_id is a 400 invalid_request_error.
func (s *Server) handleResponsesRender(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	s.renderOne(w, r, req.Model, "resp_", req.prompt, req.MaxOutputTokens, req.CacheSalt, req.Stream, renderEcho{})
}

// handleModels serves /v1/models: the base model under each of its served
// names, its LoRA adapters (parented on the first name), then the extra
// models.
// Every card carries vLLM's permission list (modelcard.List), created at
// the time of the answer as vLLM's is.
func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	now := time.Now().Unix()
	type model struct {
		ID          string                 `json:"id"`
		Object      string                 `json:"object"`
		Created     int64                  `json:"created"`
		OwnedBy     string                 `json:"owned_by"`
		Root        string                 `json:"root"`
		Parent      *string                `json:"parent"`
		MaxModelLen *int                   `json:"max_model_len"`
		Permission  []modelcard.Permission `json:"permission"`
	}
	root := s.cfg.ModelPath
	if root == "" {
		root = s.cfg.Model
	}
	data := []model{{ID: s.cfg.Model, Object: "model", Created: s.created, OwnedBy: "vllm", Root: root,
		MaxModelLen: &s.cfg.MaxModelLen, Permission: modelcard.List(now)}}
	// The base model's other served names (aliases.go): one card each, in
	// order, with the first name's root and max_model_len.
	for _, a := range s.cfg.ServedModelAliases {
		data = append(data, model{ID: a, Object: "model", Created: s.created, OwnedBy: "vllm", Root: root,
			MaxModelLen: &s.cfg.MaxModelLen, Permission: modelcard.List(now)})
	}
	// Each adapter as vLLM lists it: its lora_path as root (a LoRAModules
	// name's own name), the base model as parent, no max_model_len (vLLM
	// sets it on its base models' cards only).
	names, roots := s.loras.list()
	for i, l := range names {
		data = append(data, model{ID: l, Object: "model", Created: s.created, OwnedBy: "vllm", Root: roots[i],
			Parent: &s.cfg.Model, Permission: modelcard.List(now)})
	}
	for _, m := range s.cfg.ExtraModels { // another engine's base model (models.go)
		data = append(data, model{ID: m, Object: "model", Created: s.created, OwnedBy: "vllm", Root: m,
			MaxModelLen: &s.cfg.MaxModelLen, Permission: modelcard.List(now)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// handleReset serves POST /reset_prefix_cache: 200 when the reset succeeded
// (an AllBlocksCleared event follows, from every model's engine), 409 while
// requests hold blocks (vLLM only logs the failure).
func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	ok := true
	for _, e := range s.engines() {
		ok = e.ResetPrefixCache() && ok
	}
	if !ok {
		writeAPIError(w, &apiError{status: http.StatusConflict, typ: typeConflict,
			message: "prefix cache reset failed: running requests hold KV blocks"})
		return
	}
	w.WriteHeader(http.StatusOK)
}
