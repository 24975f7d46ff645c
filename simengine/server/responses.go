package server

import (
	"net/http"
	"time"

	"github.com/kvroute/kvroute/simengine"
)

// Responses API shapes.
type respText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type respItem struct {
	Type    string     `json:"type"`
	ID      string     `json:"id"`
	Status  string     `json:"status"`
	Role    string     `json:"role"`
	Content []respText `json:"content"`
}

type respUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

type respBody struct {
	ID        string     `json:"id"`
	Object    string     `json:"object"`
	CreatedAt int64      `json:"created_at"`
	Model     string     `json:"model"`
	Status    string     `json:"status"`
	Output    []respItem `json:"output"`
	Usage     *respUsage `json:"usage"`
	// KVTransferParams is set on a prefiller's answer (pd.go), as vLLM's
	// ResponsesResponse carries it.
	KVTransferParams *kvTransferParams `json:"kv_transfer_params,omitempty"`
}

func respUsageOf(r *simengine.Result) *respUsage {
	return &respUsage{
		// cached_tokens counts local prefix-cache hits and KV received from
		// a prefiller, as usageOf's (vLLM's num_cached_tokens).
		InputTokens: r.PromptTokens, InputTokensDetails: map[string]int{"cached_tokens": r.CachedTokens + r.RemoteKVTokens},
		OutputTokens: len(r.OutputTokens), OutputTokensDetails: map[string]int{"reasoning_tokens": 0},
		TotalTokens: r.PromptTokens + len(r.OutputTokens),
	}
}

// handleResponses serves /v1/responses (JSON, or SSE with the Responses event
// names). previous_response_id is rejected: nothing is stored. Its
// kv_transfer_params are read as on the other OpenAI routes (pd.go), as
// vLLM's Responses API reads them.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	job := s.start(w, r, openAIStart{model: req.Model, kvParams: req.KVTransferParams, maxTokens: req.MaxOutputTokens,
		salt: req.CacheSalt, prompts: onePrompt(req.prompt)})
	if job == nil {
		return
	}
	id := req.RequestID // vLLM's Responses API reads no X-Request-Id
	if id == "" {
		id = s.requestID("resp_")
	}
	msgID, model, created := s.requestID("msg_"), s.modelName(req.Model), time.Now().Unix()
	body := func(status, text string, u *respUsage) respBody {
		b := respBody{ID: id, Object: "response", CreatedAt: created, Model: model, Status: status, Output: []respItem{}, Usage: u}
		if status == "completed" {
			b.Output = []respItem{{Type: "message", ID: msgID, Status: "completed", Role: "assistant",
				Content: []respText{{Type: "output_text", Text: text, Annotations: []any{}}}}}
		}
		return b
	}
	if !req.Stream {
		rs, ok := job.resultsOrError(r.Context(), w)
		if !ok {
			return
		}
		b := body("completed", rs[0].Text, respUsageOf(&rs[0]))
		b.KVTransferParams = s.transferParams(job, id)
		writeJSON(w, http.StatusOK, b)
		return
	}
	out := newSSE(w)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		out.send(typ, fields)
	}
	n := 0
	rs, ok := job.stream(r.Context(), out, func(it genItem) {
		if n == 0 {
			send("response.created", map[string]any{"response": body("in_progress", "", nil)})
			send("response.output_item.added", map[string]any{"output_index": 0,
				"item": respItem{Type: "message", ID: msgID, Status: "in_progress", Role: "assistant", Content: []respText{}}})
			send("response.content_part.added", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
				"part": respText{Type: "output_text", Annotations: []any{}}})
		}
		n++
		send("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
			"delta": it.tok.Text})
	})
	if !ok || rs[0].Err != nil {
		return
	}
	s.transferParams(job, id) // the held blocks' lease
	res := rs[0]
	send("response.output_text.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "text": res.Text})
	send("response.completed", map[string]any{"response": body("completed", res.Text, respUsageOf(&res))})
}
