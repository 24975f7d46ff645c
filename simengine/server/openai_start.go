package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/kvroute/kvroute/simengine"
)

// openAIStart is a request of an OpenAI generation route (completions,
// chat completions, responses) as start reads it: the fields each route
// decodes under its own names.
type openAIStart struct {
	model string
	n     *int // nil for a route without n (responses)
	// prompts renders the request's prompts and says how many of them it
	// tokenized from text (the tokenizer's count for the route's path).
	prompts   func() ([][]uint32, int, *apiError)
	kvParams  json.RawMessage // kv_transfer_params (pd.go)
	maxTokens *int
	salt      *string
}

// openAIJob is a started OpenAI generation: its model, prompts, P/D
// decision and engine requests, which the route answers from.
type openAIJob struct {
	*genJob
	sel     modelSel
	prompts [][]uint32
	pd      *pdRequest
	salt    *string
}

// start runs what every OpenAI generation route runs before it answers,
// in vLLM's order, each step only when the ones before succeeded: the
// model checked, then n, then the prompts rendered (and counted), then
// kv_transfer_params read (pdBegin: a decoder reads the prefiller's
// blocks) and the engine requests submitted (submitPD). A refusal is
// answered in the OpenAI error shape and start returns nil.
func (s *Server) start(w http.ResponseWriter, r *http.Request, req openAIStart) *openAIJob {
	j := &openAIJob{salt: req.salt}
	var e *apiError
	j.sel, e = s.resolveModel(req.model)
	if e == nil {
		e = checkN(req.n)
	}
	if e == nil {
		var texts int
		j.prompts, texts, e = req.prompts()
		s.tok.add(r.URL.Path, texts)
	}
	if e == nil {
		j.pd, e = s.pdBegin(r.Context(), req.kvParams, j.prompts)
	}
	if e == nil {
		j.genJob, e = s.submitPD(j.prompts, req.maxTokens, req.salt, j.sel, j.pd)
	}
	if e != nil {
		writeAPIError(w, e)
		return nil
	}
	return j
}

// transferParams is the kv_transfer_params a prefiller answers the
// request with (pdFinish), the response's id given; nil unless the request
// produces blocks for a decoder. A streamed answer carries none, as vLLM's
// does not, but its route calls it all the same: the request's blocks are
// held under a lease, freed when a read or LeaseTTL ends it, as vLLM's
// connector holds them until its abort timeout.
func (s *Server) transferParams(j *openAIJob, id string) *kvTransferParams {
	if !j.pd.produce {
		return nil
	}
	return s.pdFinish(j.pd, id, j.ids[0], s.pdEngineRequest(j.prompts[0], j.salt, j.sel.lora))
}

// resultsOrError waits for the job's results (results); when the engine
// failed one or the client went away it answers the error in the OpenAI
// shape and reports false.
func (j *genJob) resultsOrError(ctx context.Context, w http.ResponseWriter) ([]simengine.Result, bool) {
	rs, err := j.results(ctx)
	if err != nil {
		writeAPIError(w, engineError(err))
		return nil, false
	}
	return rs, true
}
