package tokenin

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/internal/jsonids"
	"github.com/kvroute/kvroute/internal/jsonscan"
	"github.com/kvroute/kvroute/internal/mmfeatures"
	"github.com/kvroute/kvroute/render"
)

// Path is vLLM's token-in, token-out generation route.
const Path = "/inference/v1/generate"

// members are the members of vLLM's GenerateRequest a router reads: the
// prompt's token IDs, its cache salt and its multimodal features.
var members = []string{"token_ids", "cache_salt", "features"}

// Prompt reads the prompt of a GenerateRequest body: its token IDs,
// multimodal items (sorted by offset, the order vLLM's engine keys blocks
// in) and cache salt.
// A body without token IDs, or with features vLLM refuses, is an error:
// features whose modalities, hash and placeholder counts, or kwargs_data
// and mm_metadata lists do not match, placeholders that are empty,
// overlapping or past the prompt's end (package mmfeatures states vLLM's
// rules). Routing such a request by keys the engine never produces would
// only send it to an arbitrary engine to be refused there.
//
// Members are read as vLLM's request model reads them: by their exact
// names, the last of a repeated one winning (jsonscan.Members), so that a
// "Token_IDs" or "Features" vLLM ignores is ignored here too instead of
// routing the request by keys the engine never computes.
func Prompt(body []byte) (render.Prompt, string, error) {
	var v [3][]byte
	if err := jsonscan.Members(body, members, v[:]); err != nil {
		return render.Prompt{}, "", err
	}
	var ids []uint32
	if v[0] != nil {
		// Most of the body, parsed by hand; each ID read as vLLM's
		// list[int] reads it (1.0 and "1" are 1), a null refused as vLLM
		// refuses it (encoding/json would read a 0).
		var err error
		if ids, err = jsonids.ParseLax(v[0]); err != nil {
			return render.Prompt{}, "", fmt.Errorf("token_ids: %w", err)
		}
	}
	var salt *string
	if v[1] != nil {
		if err := json.Unmarshal(v[1], &salt); err != nil {
			return render.Prompt{}, "", fmt.Errorf("cache_salt: %w", err)
		}
	}
	var features *mmfeatures.Features
	if v[2] != nil {
		if err := json.Unmarshal(v[2], &features); err != nil {
			return render.Prompt{}, "", fmt.Errorf("features: %w", err)
		}
	}
	if len(ids) == 0 {
		return render.Prompt{}, "", errors.New("token_ids must be a non-empty list of token IDs")
	}
	p := render.Prompt{TokenIDs: ids}
	if features != nil {
		items, err := features.Items(len(ids))
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
	if salt == nil {
		return p, "", nil
	}
	return p, *salt, nil
}
