package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/kvroute/kvroute/simengine"
)

var jsonMarshal = json.Marshal

func checkN(n *int) *apiError {
	if n != nil && *n != 1 {
		return withParam(badRequest("n must be 1: the simulated engine generates one sequence per prompt"), "n")
	}
	return nil
}

func finishReason(r *simengine.Result) *string {
	if r == nil {
		return nil
	}
	s := r.FinishReason
	return &s
}

// handleCompletions serves /v1/completions (JSON or SSE).
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if e := s.decodeCompletion(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	sel, e := s.resolveModel(req.Model)
	if e == nil {
		e = checkN(req.N)
	}
	var prompts [][]uint32
	if e == nil {
		prompts, e = req.prompts()
		s.tok.add(r.URL.Path, req.texts)
	}
	var pd *pdRequest
	if e == nil {
		pd, e = s.pdBegin(r.Context(), req.KVTransferParams, prompts)
	}
	var job *genJob
	if e == nil {
		job, e = s.submitPD(prompts, req.MaxTokens, req.CacheSalt, sel, pd)
	}
	if e != nil {
		writeAPIError(w, e)
		return
	}
	id, model, created := s.responseID(r, "cmpl-", req.RequestID), s.modelName(req.Model), time.Now().Unix()
	type choice struct {
		Index        int     `json:"index"`
		Text         string  `json:"text"`
		Logprobs     any     `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
		StopReason   any     `json:"stop_reason"`
	}
	type body struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   *usage   `json:"usage,omitempty"`
		// KVTransferParams is set on a prefiller's answer (pd.go).
		KVTransferParams *kvTransferParams `json:"kv_transfer_params,omitempty"`
	}
	if !req.Stream {
		rs, err := job.results(r.Context())
		if err != nil {
			writeAPIError(w, engineError(err))
			return
		}
		b := body{ID: id, Object: "text_completion", Created: created, Model: model}
		if pd.produce {
			b.KVTransferParams = s.pdFinish(pd, id, job.ids[0], s.pdEngineRequest(prompts[0], req.CacheSalt, sel.lora))
		}
		for i := range rs {
			b.Choices = append(b.Choices, choice{Index: i, Text: rs[i].Text, FinishReason: finishReason(&rs[i])})
		}
		u := usageOf(rs)
		b.Usage = &u
		writeJSON(w, http.StatusOK, b)
		return
	}
	out := newSSE(w)
	rs, ok := job.stream(r.Context(), out, func(it genItem) {
		c := choice{Index: it.idx, Text: it.tok.Text}
		if it.tok.Index == job.maxTokens-1 {
			c.FinishReason = strPtr(simengine.FinishLength)
		}
		out.send("", body{ID: id, Object: "text_completion", Created: created, Model: model, Choices: []choice{c}})
	})
	if !ok {
		return // client gone: requests aborted
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := usageOf(rs)
		out.send("", body{ID: id, Object: "text_completion", Created: created, Model: model, Choices: []choice{}, Usage: &u})
	}
	out.done()
}

// handleChat serves /v1/chat/completions (JSON or SSE).
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	sel, e := s.resolveModel(req.Model)
	if e == nil {
		e = checkN(req.N)
	}
	var prompt []uint32
	if e == nil {
		prompt, e = req.prompt()
		s.tok.add(r.URL.Path, 1)
	}
	var pd *pdRequest
	if e == nil {
		pd, e = s.pdBegin(r.Context(), req.KVTransferParams, [][]uint32{prompt})
	}
	var job *genJob
	if e == nil {
		job, e = s.submitPD([][]uint32{prompt}, req.maxTokens(s.cfg.DefaultMaxTokens), req.CacheSalt, sel, pd)
	}
	if e != nil {
		writeAPIError(w, e)
		return
	}
	id, model, created := s.responseID(r, "chatcmpl-", req.RequestID), s.modelName(req.Model), time.Now().Unix()
	type message struct {
		Role      string `json:"role,omitempty"`
		Content   string `json:"content"`
		ToolCalls []any  `json:"tool_calls,omitempty"`
	}
	type choice struct {
		Index        int      `json:"index"`
		Message      *message `json:"message,omitempty"`
		Delta        *message `json:"delta,omitempty"`
		Logprobs     any      `json:"logprobs"`
		FinishReason *string  `json:"finish_reason"`
	}
	type body struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   *usage   `json:"usage,omitempty"`
		// KVTransferParams is set on a prefiller's answer (pd.go).
		KVTransferParams *kvTransferParams `json:"kv_transfer_params,omitempty"`
	}
	if !req.Stream {
		rs, err := job.results(r.Context())
		if err != nil {
			writeAPIError(w, engineError(err))
			return
		}
		u := usageOf(rs)
		b := body{ID: id, Object: "chat.completion", Created: created, Model: model, Usage: &u,
			Choices: []choice{{Message: &message{Role: "assistant", Content: rs[0].Text}, FinishReason: finishReason(&rs[0])}}}
		if pd.produce {
			b.KVTransferParams = s.pdFinish(pd, id, job.ids[0], s.pdEngineRequest(prompt, req.CacheSalt, sel.lora))
		}
		writeJSON(w, http.StatusOK, b)
		return
	}
	out := newSSE(w)
	chunk := func(c choice) body {
		return body{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []choice{c}}
	}
	first := true
	rs, ok := job.stream(r.Context(), out, func(it genItem) {
		if first { // vLLM sends the role with the first output
			out.send("", chunk(choice{Delta: &message{Role: "assistant", Content: ""}}))
			first = false
		}
		c := choice{Delta: &message{Content: it.tok.Text}}
		if it.tok.Index == job.maxTokens-1 {
			c.FinishReason = strPtr(simengine.FinishLength)
		}
		out.send("", chunk(c))
	})
	if !ok {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := usageOf(rs)
		out.send("", body{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []choice{}, Usage: &u})
	}
	out.done()
}

func writeStreamError(out *sse, err error) {
	e := engineError(err)
	var b errorBody
	b.Error.Message, b.Error.Type, b.Error.Code = e.message, e.typ, e.status
	out.send("", b)
}

func strPtr(s string) *string { return &s }

// modelName is the model a response reports: the request's, or the served one.
func (s *Server) modelName(req string) string {
	if req == "" {
		return s.cfg.Model
	}
	return req
}
