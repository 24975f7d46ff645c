package gateway

import (
	"encoding/json"
	"errors"

	"github.com/kvroute/kvroute/internal/mmfeatures"
	"github.com/kvroute/kvroute/render"
)

// GeneratePath is vLLM's token-in, token-out generation route
// (/inference/v1/generate, registered with --enable-scale-out or in
// vLLM's tokens-only mode). Its body is vLLM's GenerateRequest: the prompt
// as token_ids (already rendered, multimodal placeholders expanded), its
// multimodal features (mm_hashes and mm_placeholders by modality), the
// sampling parameters, model (a LoRA adapter's name routes to it), stream,
// cache_salt, priority and kv_transfer_params. It answers token IDs, not
// text. The gateway routes such a request by its own token_ids, features
// and cache salt, without rendering anything, and forwards the body
// unchanged: a client that renders by itself reaches the cache-warm engine
// with no tokenizer on the path.
const GeneratePath = "/inference/v1/generate"

// apiGenerate labels GeneratePath's requests in the gateway's metrics.
const apiGenerate render.API = "generate"

// generateRequest is the part of vLLM's GenerateRequest the router needs.
type generateRequest struct {
	TokenIDs  []uint32             `json:"token_ids"`
	CacheSalt *string              `json:"cache_salt"`
	Features  *mmfeatures.Features `json:"features"`
}

// generatePrompt reads the prompt of a GenerateRequest body: its token IDs,
// multimodal items (sorted by offset, the order vLLM's engine keys blocks
// in) and cache salt.
// A body without token IDs, or with features vLLM refuses, is an error:
// features whose modalities, hash and placeholder counts, or kwargs_data
// and mm_metadata lists do not match, placeholders that are empty,
// overlapping or past the prompt's end (package mmfeatures states vLLM's
// rules). Routing such a request by keys the engine never produces would
// only send it to an arbitrary engine to be refused there.
func generatePrompt(body []byte) (render.Prompt, string, error) {
	var g generateRequest
	if err := json.Unmarshal(body, &g); err != nil {
		return render.Prompt{}, "", err
	}
	if len(g.TokenIDs) == 0 {
		return render.Prompt{}, "", errors.New("token_ids must be a non-empty list of token IDs")
	}
	p := render.Prompt{TokenIDs: g.TokenIDs}
	if g.Features != nil {
		items, err := g.Features.Items(len(g.TokenIDs))
		if err != nil {
			return render.Prompt{}, "", err
		}
		if items != nil {
			p.Features = make([]render.MMFeature, len(items))
			for i, it := range items {
				p.Features[i] = render.MMFeature(it)
			}
		}
	}
	salt := ""
	if g.CacheSalt != nil {
		salt = *g.CacheSalt
	}
	return p, salt, nil
}
