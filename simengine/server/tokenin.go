package server

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/jsonids"
	"github.com/kvroute/kvroute/internal/mmfeatures"
	"github.com/kvroute/kvroute/internal/tokenin"
	"github.com/kvroute/kvroute/simengine"
)

// GeneratePath is vLLM's token-in, token-out route: a prompt given as token
// IDs (rendered elsewhere) generates token IDs, with no tokenizer on either
// side. vLLM registers it with --enable-scale-out (and in its tokens-only
// mode), beside the render routes; so does the simulated engine.
const GeneratePath = "/inference/v1/generate"

// tokenizations counts the prompts the server turned from text into tokens,
// by route: every render call, and every generation whose prompt came as
// text. A prompt given as token IDs (completions' prompt as a list of IDs,
// GeneratePath) costs none, so a test can tell how often a router's traffic
// made the engine tokenize each prompt.
type tokenizations struct {
	total atomic.Uint64
	vec   *prometheus.CounterVec
}

func newTokenizations(reg prometheus.Registerer) (*tokenizations, error) {
	t := &tokenizations{vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "simengine_tokenizations_total",
		Help: "Prompts the simulated engine tokenized from text (chat template included), by route; prompts given as token IDs are not counted.",
	}, []string{"route"})}
	if err := reg.Register(t.vec); err != nil {
		return nil, err
	}
	return t, nil
}

// add counts n prompts tokenized on route.
func (t *tokenizations) add(route string, n int) {
	if t == nil || n <= 0 {
		return
	}
	t.total.Add(uint64(n))
	t.vec.WithLabelValues(route).Add(float64(n))
}

// Tokenizations returns how many prompts the server has tokenized from text
// since it started (the sum of simengine_tokenizations_total).
func (s *Server) Tokenizations() uint64 { return s.tok.total.Load() }

// generateIn is the part of vLLM's GenerateRequest the engine uses.
type generateIn struct {
	RequestID      string          `json:"request_id"`
	TokenIDs       laxTokenIDs     `json:"token_ids"`
	Model          string          `json:"model"`
	SamplingParams *generateParams `json:"sampling_params"`
	Stream         bool            `json:"stream"`
	StreamOptions  *streamOptions  `json:"stream_options"`
	CacheSalt      *string         `json:"cache_salt"`
	// Features are the prompt's multimodal items. The simulated engine has
	// no multimodal inputs: it admits them by vLLM's rules and serves the
	// prompt as its token IDs alone.
	Features *mmfeatures.Features `json:"features"`
	// ContentParts are the prompt's multimodal items as raw media (vLLM
	// fetches and resolves an image_url, audio_url or video_url part);
	// read by tokenin.ContentParts. The simulated engine has no
	// multimodal model: it refuses a media part as vLLM refuses one for a
	// text-only model.
	ContentParts json.RawMessage `json:"content_parts"`
	// ECTransferParams are vLLM's encoder-cache transfer parameters,
	// read by tokenin.TransferParams only for whether they are set:
	// they admit metadata-only multimodal items.
	ECTransferParams json.RawMessage `json:"ec_transfer_params"`
	// OutputMode is "tokens" or "text" (outputMode).
	OutputMode json.RawMessage `json:"output_mode"`
}

// errNotMultimodal is vLLM's refusal of a multimodal item for a model
// without multimodal inputs (its multimodal item tracker's ValueError,
// answered 400 BadRequestError).
const errNotMultimodal = "This model does not support multi-modal inputs"

func (r *generateIn) cacheSalt() *string { return r.CacheSalt }

// laxTokenIDs is a list of token IDs read as vLLM's request models read a
// list[int]: by pydantic's lax rules (jsonids.ParseLax), 1.0, "7" and true
// being IDs, a null ID or a fraction refused. A null list is nil.
type laxTokenIDs []uint32

// UnmarshalJSON reads b with jsonids.ParseLax.
func (t *laxTokenIDs) UnmarshalJSON(b []byte) error {
	ids, err := jsonids.ParseLax(b)
	if err != nil {
		return err
	}
	*t = ids
	return nil
}

// generateParams is the part of vLLM's SamplingParams the engine uses.
type generateParams struct {
	N          *int  `json:"n"`
	MaxTokens  *int  `json:"max_tokens"`
	Detokenize *bool `json:"detokenize"`
}

// generateChoice is one choice of vLLM's GenerateResponse (and of its stream
// chunks): generated token IDs, and their text in the "text" output mode.
type generateChoice struct {
	Index        int      `json:"index"`
	Logprobs     any      `json:"logprobs"`
	FinishReason *string  `json:"finish_reason"`
	TokenIDs     []uint32 `json:"token_ids"`
	Text         *string  `json:"text,omitempty"`
}

// handleGenerate serves GeneratePath: vLLM's GenerateRequest in, its
// GenerateResponse out (an SSE stream of GenerateStreamResponse chunks with
// stream=true). The prompt is used as given; nothing is tokenized. Features
// vLLM refuses (package mmfeatures states its rules: mm_hashes and
// mm_placeholders naming the same modalities with as many entries, no
// empty, overlapping or out-of-prompt placeholder) are answered 400, as
// vLLM answers them; admitted ones key the engine's blocks as vLLM's items
// do (each item's mm_hash on every block its placeholders overlap,
// simengine.MMItem), so the KV events carry them. content_parts is read as vLLM's request model reads
// it (a list of objects or null, refused beside features); a media part in
// it is answered 400 as a text-only vLLM model answers it, the simulated
// engine having no multimodal model to resolve the media with, and a list
// without one adds nothing to the prompt. Metadata-only items (an
// mm_metadata entry without its kwargs_data) are answered 400 unless
// ec_transfer_params is a non-empty object or requires_kv is true, as
// vLLM's GenerateRequest answers them. output_mode "text" adds each
// choice's text to its token IDs (outputMode).
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	var req generateIn
	if e := s.decodeJSON(w, r, &req); e != nil {
		writeAPIError(w, e)
		return
	}
	if req.SamplingParams == nil {
		writeAPIError(w, withParam(badRequest("sampling_params is required"), "sampling_params"))
		return
	}
	mode, e := outputMode(req.OutputMode, req.SamplingParams.Detokenize)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	var parts, media bool
	if req.ContentParts != nil {
		var err error
		if parts, media, err = tokenin.ContentParts(req.ContentParts); err != nil {
			writeAPIError(w, withParam(badRequest("%s", err.Error()), "content_parts"))
			return
		}
	}
	if parts && req.Features != nil {
		// GenerateRequest's validator: both set is refused.
		writeAPIError(w, badRequest("content_parts and features are mutually exclusive"))
		return
	}
	ec, err := tokenin.TransferParams(req.ECTransferParams)
	if err != nil {
		writeAPIError(w, withParam(badRequest("%s", err.Error()), "ec_transfer_params"))
		return
	}
	var mm []simengine.MMItem
	if req.Features != nil && len(req.TokenIDs) > 0 {
		items, err := req.Features.Items(len(req.TokenIDs))
		if err != nil {
			writeAPIError(w, withParam(badRequest("%s", err.Error()), "features"))
			return
		}
		if err := req.Features.CheckTransfer(ec); err != nil {
			// GenerateRequest's validator, not the features' own.
			writeAPIError(w, badRequest("%s", err.Error()))
			return
		}
		for _, it := range items {
			mm = append(mm, simengine.MMItem{Identifier: it.Hash, Offset: it.Offset, Length: it.Length})
		}
	}
	sel, e := s.resolveModel(req.Model)
	if e == nil && sel.lora != "" && s.cfg.EnableTowerConnectorLoRA {
		for i := range mm { // vLLM's _get_mm_identifier with tower-connector LoRA
			mm[i].Identifier = sel.lora + ":" + mm[i].Identifier
		}
	}
	if e == nil && media {
		e = badRequest(errNotMultimodal)
	}
	if e == nil {
		e = checkN(req.SamplingParams.N)
	}
	if e == nil && len(req.TokenIDs) == 0 {
		e = withParam(badRequest("token_ids must not be empty"), "token_ids")
	}
	var job *genJob
	if e == nil {
		job, e = s.submitMM([][]uint32{req.TokenIDs}, req.SamplingParams.MaxTokens, req.CacheSalt, sel, nil, mm)
	}
	if e != nil {
		writeAPIError(w, e)
		return
	}
	id := s.responseID(r, "generate-tokens-", req.RequestID)
	if !req.Stream {
		rs, ok := job.resultsOrError(r.Context(), w)
		if !ok {
			return
		}
		u := usageOf(rs)
		writeJSON(w, http.StatusOK, struct {
			RequestID        string           `json:"request_id"`
			Model            string           `json:"model"`
			Created          int64            `json:"created"`
			OutputMode       string           `json:"output_mode"`
			Choices          []generateChoice `json:"choices"`
			Usage            *usage           `json:"usage"`
			PromptLogprobs   any              `json:"prompt_logprobs"`
			KVTransferParams any              `json:"kv_transfer_params"`
		}{id, s.modelName(req.Model), time.Now().Unix(), mode,
			[]generateChoice{{FinishReason: finishReason(&rs[0]), TokenIDs: nonNilTokens(rs[0].OutputTokens),
				Text: textOf(mode, rs[0].Text)}}, &u, nil, nil})
		return
	}
	type chunk struct {
		RequestID  string           `json:"request_id"`
		OutputMode string           `json:"output_mode"`
		Choices    []generateChoice `json:"choices"`
		Usage      *usage           `json:"usage,omitempty"`
	}
	out := newSSE(w)
	rs, ok := job.stream(r.Context(), out, func(it genItem) {
		c := generateChoice{TokenIDs: []uint32{it.tok.Token}, Text: textOf(mode, it.tok.Text)}
		if it.tok.Index == job.maxTokens-1 {
			c.FinishReason = strPtr(simengine.FinishLength)
		}
		out.send("", chunk{RequestID: id, OutputMode: mode, Choices: []generateChoice{c}})
	})
	if !ok {
		return // client gone: the request is aborted
	}
	if req.StreamOptions.includeUsage() {
		u := usageOf(rs)
		out.send("", chunk{RequestID: id, OutputMode: mode, Choices: []generateChoice{}, Usage: &u})
	}
	out.done()
}

func nonNilTokens(t []uint32) []uint32 {
	if t == nil {
		return []uint32{}
	}
	return t
}

// parseTokenList reads a non-empty JSON list of token IDs (decimal integers
// up to 2³²−1, whitespace allowed) into *ids and reports whether raw was
// exactly that. encoding/json decodes such a list through reflection after a
// validation pass, several times slower than the engine's own tokenizer on
// the same prompt's text, which would make a token-ID prompt cost the
// simulated engine more than text, the reverse of a real engine.
func parseTokenList(raw []byte, ids *[]uint32) bool {
	out, err := jsonids.Parse(raw) // null is nil: refused below with the empty list
	if err != nil || len(out) == 0 {
		return false
	}
	*ids = out
	return true
}
