package gateway

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

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
	TokenIDs  []uint32 `json:"token_ids"`
	CacheSalt *string  `json:"cache_salt"`
	Features  *struct {
		MMHashes       map[string][]string `json:"mm_hashes"`
		MMPlaceholders map[string][]struct {
			Offset int `json:"offset"`
			Length int `json:"length"`
		} `json:"mm_placeholders"`
	} `json:"features"`
}

// generatePrompt reads the prompt of a GenerateRequest body: its token IDs,
// multimodal items (sorted by offset then modality, as render answers are)
// and cache salt.
// A body without token IDs, or whose features do not pair each hash with a
// placeholder inside the prompt, is an error (the engine would refuse it too).
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
		for mod, hashes := range g.Features.MMHashes {
			ph := g.Features.MMPlaceholders[mod]
			if len(ph) != len(hashes) {
				return render.Prompt{}, "", fmt.Errorf("features: %d %s hashes but %d placeholders", len(hashes), mod, len(ph))
			}
			for i, h := range hashes {
				// Offset+Length is not computed: a client's lengths near the
				// int range would wrap it below the prompt's end.
				if ph[i].Offset < 0 || ph[i].Length <= 0 || ph[i].Offset > len(g.TokenIDs) || ph[i].Length > len(g.TokenIDs)-ph[i].Offset {
					return render.Prompt{}, "", fmt.Errorf("features: %s placeholder %d lies outside the prompt", mod, i)
				}
				p.Features = append(p.Features, render.MMFeature{Modality: mod, Hash: h, Offset: ph[i].Offset, Length: ph[i].Length})
			}
		}
		// Render's order: by offset, then modality, each modality's items in
		// their list order. The modalities come from a map, so without the
		// modality tie-break identical requests could hash their items in
		// different orders and get different block keys.
		slices.SortStableFunc(p.Features, func(a, b render.MMFeature) int {
			if a.Offset != b.Offset {
				return cmp.Compare(a.Offset, b.Offset)
			}
			return strings.Compare(a.Modality, b.Modality)
		})
	}
	salt := ""
	if g.CacheSalt != nil {
		salt = *g.CacheSalt
	}
	return p, salt, nil
}
