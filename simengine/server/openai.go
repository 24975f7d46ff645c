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

// openAIAnswer is the envelope of a completion's and a chat completion's
// answer, and of each chunk of their streams; C is the route's choice.
type openAIAnswer[C any] struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []C    `json:"choices"`
	Usage   *usage `json:"usage,omitempty"`
	// KVTransferParams is set on a prefiller's answer (pd.go).
	KVTransferParams *kvTransferParams `json:"kv_transfer_params,omitempty"`
}

// chunk is a stream's chunk of the one choice c, in a's envelope.
func (a openAIAnswer[C]) chunk(c C) openAIAnswer[C] {
	a.Choices = []C{c}
	return a
}

// endStream ends a stream whose chunks are in a's envelope, as vLLM does:
// a chunk of no choices with the usage of rs when opts asks for it
// (include_usage), then [DONE].
func (a openAIAnswer[C]) endStream(out *sse, opts *streamOptions, rs []simengine.Result) {
	if opts.includeUsage() {
		u := usageOf(rs)
		a.Choices, a.Usage = []C{}, &u
		out.send("", a)
	}
	out.done()
}

// handleCompletions serves /v1/completions (JSON or SSE).
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if e := s.decodeCompletion(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	job := s.start(w, r, openAIStart{model: req.Model, n: req.N, kvParams: req.KVTransferParams, maxTokens: req.MaxTokens, salt: req.CacheSalt,
		prompts: func() ([][]uint32, int, *apiError) {
			p, e := req.prompts()
			return p, req.texts, e
		}})
	if job == nil {
		return
	}
	type choice struct {
		Index        int     `json:"index"`
		Text         string  `json:"text"`
		Logprobs     any     `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
		StopReason   any     `json:"stop_reason"`
	}
	id := s.responseID(r, "cmpl-", req.RequestID)
	head := openAIAnswer[choice]{ID: id, Object: "text_completion", Created: time.Now().Unix(), Model: s.modelName(req.Model)}
	if !req.Stream {
		rs, ok := job.resultsOrError(r.Context(), w)
		if !ok {
			return
		}
		b := head
		b.KVTransferParams = s.transferParams(job, id)
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
		out.send("", head.chunk(c))
	})
	if !ok {
		return // client gone: requests aborted
	}
	s.transferParams(job, id) // the held blocks' lease
	head.endStream(out, req.StreamOptions, rs)
}

// handleChat serves /v1/chat/completions (JSON or SSE).
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	job := s.start(w, r, openAIStart{model: req.Model, n: req.N, kvParams: req.KVTransferParams,
		maxTokens: req.maxTokens(s.cfg.DefaultMaxTokens), salt: req.CacheSalt, prompts: onePrompt(req.prompt)})
	if job == nil {
		return
	}
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
	id := s.responseID(r, "chatcmpl-", req.RequestID)
	head := openAIAnswer[choice]{ID: id, Object: "chat.completion.chunk", Created: time.Now().Unix(), Model: s.modelName(req.Model)}
	if !req.Stream {
		rs, ok := job.resultsOrError(r.Context(), w)
		if !ok {
			return
		}
		u := usageOf(rs)
		b := head
		b.Object, b.Usage = "chat.completion", &u
		b.Choices = []choice{{Message: &message{Role: "assistant", Content: rs[0].Text}, FinishReason: finishReason(&rs[0])}}
		b.KVTransferParams = s.transferParams(job, id)
		writeJSON(w, http.StatusOK, b)
		return
	}
	out := newSSE(w)
	first := true
	rs, ok := job.stream(r.Context(), out, func(it genItem) {
		if first { // vLLM sends the role with the first output
			out.send("", head.chunk(choice{Delta: &message{Role: "assistant", Content: ""}}))
			first = false
		}
		c := choice{Delta: &message{Content: it.tok.Text}}
		if it.tok.Index == job.maxTokens-1 {
			c.FinishReason = strPtr(simengine.FinishLength)
		}
		out.send("", head.chunk(c))
	})
	if !ok {
		return
	}
	s.transferParams(job, id) // the held blocks' lease
	head.endStream(out, req.StreamOptions, rs)
}

// onePrompt is openAIStart.prompts for a route with one prompt, rendered
// by prompt (always counted as one text).
func onePrompt(prompt func() ([]uint32, *apiError)) func() ([][]uint32, int, *apiError) {
	return func() ([][]uint32, int, *apiError) {
		p, e := prompt()
		return [][]uint32{p}, 1, e
	}
}

func writeStreamError(out *sse, err error) {
	e := engineError(err)
	var b errorBody
	b.Error.Message, b.Error.Type, b.Error.Code = e.message, e.typ, e.status
	out.send("", b)
}

func strPtr(s string) *string { return &s }
