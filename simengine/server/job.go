package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/kvroute/kvroute/simengine"
)

// genItem is one engine callback: a token or a final result of prompt idx.
type genItem struct {
	idx int
	tok *simengine.TokenEvent
	res *simengine.Result
}

// genJob collects the callbacks of the engine requests of one HTTP request in
// an unbounded queue, so engine callbacks never block.
type genJob struct {
	s         *Server
	eng       *simengine.Engine // the engine of the request's model
	ids       []simengine.ReqID
	prompts   [][]uint32
	maxTokens int
	remaining int
	// hold is set for a prefiller's request (Request.HoldKV): abort frees
	// the blocks of one that finished before it, which nothing will read.
	hold bool

	mu     sync.Mutex
	items  []genItem
	notify chan struct{}
}

func (j *genJob) push(it genItem) {
	j.mu.Lock()
	j.items = append(j.items, it)
	j.mu.Unlock()
	select {
	case j.notify <- struct{}{}:
	default:
	}
}

// wait returns the queued callbacks, blocking until there is one or ctx ends
// (then the engine requests are aborted).
func (j *genJob) wait(ctx context.Context) ([]genItem, error) {
	for {
		j.mu.Lock()
		items := j.items
		j.items = nil
		j.mu.Unlock()
		if len(items) > 0 {
			for _, it := range items {
				if it.res != nil {
					j.remaining--
				}
			}
			return items, nil
		}
		select {
		case <-j.notify:
		case <-ctx.Done():
			j.abort()
			return nil, ctx.Err()
		}
	}
}

// abort aborts the engine requests; a prefiller's request that finished
// first holds its blocks for a decoder its answer will never name, so they
// are freed (Abort is synchronous: once it returns, a request is either
// aborted or finished).
func (j *genJob) abort() {
	for _, id := range j.ids {
		if !j.eng.Abort(id) && j.hold {
			j.eng.ReleaseKV(id)
		}
	}
}

// results waits for every prompt's result (non-streaming requests).
func (j *genJob) results(ctx context.Context) ([]simengine.Result, error) {
	out := make([]simengine.Result, len(j.prompts))
	for j.remaining > 0 {
		items, err := j.wait(ctx)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if it.res != nil {
				out[it.idx] = *it.res
			}
		}
	}
	for _, r := range out {
		if r.Err != nil {
			return nil, r.Err
		}
	}
	return out, nil
}

// stream runs a streaming response's loop: it passes every output token to
// onToken, in the order the engine produced them, and writes a prompt's
// failed result as an SSE error event, until every prompt has its result.
// It returns the results by prompt index, and false when the client went
// away (the engine requests are then aborted and nothing more is written).
func (j *genJob) stream(ctx context.Context, out *sse, onToken func(it genItem)) ([]simengine.Result, bool) {
	rs := make([]simengine.Result, len(j.prompts))
	for j.remaining > 0 {
		items, err := j.wait(ctx)
		if err != nil {
			return nil, false
		}
		for _, it := range items {
			if it.res == nil {
				onToken(it)
				continue
			}
			rs[it.idx] = *it.res
			if it.res.Err != nil {
				writeStreamError(out, it.res.Err)
			}
		}
	}
	return rs, true
}

// submitPD validates lengths and token IDs like vLLM and submits one engine
// request per prompt, with the P/D layer's decision (pd.go; nil = none): the
// prompt tokens a KV transfer delivered.
func (s *Server) submitPD(prompts [][]uint32, maxTokens *int, salt *string, sel modelSel, pd *pdRequest) (*genJob, *apiError) {
	return s.submitMM(prompts, maxTokens, salt, sel, pd, nil)
}

// submitMM is submitPD with the prompts' multimodal items (the token-in
// route's features; nil for none), which key the engine's blocks as vLLM's
// do (simengine.MMItem).
func (s *Server) submitMM(prompts [][]uint32, maxTokens *int, salt *string, sel modelSel, pd *pdRequest, mm []simengine.MMItem) (*genJob, *apiError) {
	if maxTokens == nil {
		d := s.cfg.DefaultMaxTokens
		maxTokens = &d
	}
	if *maxTokens < 1 {
		return nil, withParam(badRequest("max_tokens must be at least 1, got %d.", *maxTokens), "max_tokens")
	}
	for _, p := range prompts {
		if len(p)+*maxTokens > s.cfg.MaxModelLen {
			return nil, badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
				s.cfg.MaxModelLen, len(p)+*maxTokens, len(p), *maxTokens)
		}
	}
	// vLLM's input processor refuses a prompt ID past the tokenizer's
	// vocabulary (a token-ID prompt; text never tokenizes to one).
	for _, p := range prompts {
		if len(p) > 0 && slices.Max(p) > maxTokenID {
			return nil, badRequest("Token id %d is out of vocabulary", slices.Max(p))
		}
	}
	if sel.eng == nil {
		sel.eng = s.eng
	}
	j := &genJob{s: s, eng: sel.eng, prompts: prompts, maxTokens: *maxTokens, remaining: len(prompts), notify: make(chan struct{}, 1)}
	for i, p := range prompts {
		req := simengine.Request{Prompt: p, MaxTokens: *maxTokens, LoRAName: sel.lora, LoRAID: sel.loraID,
			OnToken: func(ev simengine.TokenEvent) { j.push(genItem{idx: i, tok: &ev}) },
			OnDone:  func(r simengine.Result) { j.push(genItem{idx: i, res: &r}) },
		}
		if salt != nil {
			req.CacheSalt = *salt
		}
		req.MM = mm
		if pd != nil {
			req.RemoteKVTokens, req.HoldKV = pd.remote, pd.produce
			j.hold = pd.produce
		}
		id, err := sel.eng.Submit(req)
		if err != nil {
			j.abort()
			return nil, engineError(err)
		}
		j.ids = append(j.ids, id)
	}
	return j, nil
}

// maxTokenID is the simulated tokenizer's largest token ID.
const maxTokenID = simengine.TokenOffset + simengine.VocabSize - 1

// engineError maps an engine error to an HTTP error.
func engineError(err error) *apiError {
	switch {
	case errors.Is(err, simengine.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, typ: typeUnavail, message: "the engine is shutting down"}
	case errors.Is(err, simengine.ErrAborted):
		return &apiError{status: http.StatusInternalServerError, typ: typeInternal, message: "request aborted"}
	case errors.Is(err, simengine.ErrTooLong), errors.Is(err, simengine.ErrEmptyPrompt), errors.Is(err, simengine.ErrMaxTokens):
		return badRequest("%v", err)
	}
	return &apiError{status: http.StatusInternalServerError, typ: typeInternal, message: fmt.Sprint(err)}
}

// usage is the OpenAI usage object, with vLLM's prompt_tokens_details.
type usage struct {
	PromptTokens        int            `json:"prompt_tokens"`
	TotalTokens         int            `json:"total_tokens"`
	CompletionTokens    int            `json:"completion_tokens"`
	PromptTokensDetails *promptDetails `json:"prompt_tokens_details"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

func usageOf(rs []simengine.Result) usage {
	var u usage
	u.PromptTokensDetails = &promptDetails{}
	for _, r := range rs {
		u.PromptTokens += r.PromptTokens
		u.CompletionTokens += len(r.OutputTokens)
		// vLLM's cached_tokens counts the tokens computed before the first
		// step: local prefix-cache hits and KV received from a prefiller.
		u.PromptTokensDetails.CachedTokens += r.CachedTokens + r.RemoteKVTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// sse writes server-sent events and flushes each one.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	return &sse{w: w, rc: rc}
}

// send writes "event: <name>" (when name != "") and "data: <json>".
func (s *sse) send(name string, v any) {
	if name != "" {
		_, _ = s.w.Write([]byte("event: " + name + "\n"))
	}
	b, err := jsonMarshal(v)
	if err != nil {
		b = []byte(`{"error":{"message":"encoding failed","type":"InternalServerError","param":null,"code":500}}`)
	}
	_, _ = s.w.Write([]byte("data: "))
	_, _ = s.w.Write(b)
	_, _ = s.w.Write([]byte("\n\n"))
	_ = s.rc.Flush()
}

func (s *sse) done() {
	_, _ = s.w.Write([]byte("data: [DONE]\n\n"))
	_ = s.rc.Flush()
}
