package tokenin

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kvroute/kvroute/internal/jsonids"
	"github.com/kvroute/kvroute/internal/jsonscan"
	"github.com/kvroute/kvroute/internal/mmfeatures"
	"github.com/kvroute/kvroute/render"
)

// Path is vLLM's token-in, token-out generation route.
const Path = "/inference/v1/generate"

// members are the members of vLLM's GenerateRequest a router reads: the
// prompt's token IDs, its cache salt, its multimodal features, its raw
// multimodal content parts and its encoder-cache transfer parameters
// (which admit metadata-only items, mmfeatures.Features.CheckTransfer).
var members = []string{"token_ids", "cache_salt", "features", "content_parts", "ec_transfer_params"}

// mediaTypes are the content part types vLLM's generate route resolves
// into multimodal items (ServingTokens.serve_tokens parses an "image_url",
// "audio_url" or "video_url" part, by its url or uuid); a part of any
// other type adds nothing to the prompt.
var mediaTypes = []string{"image_url", "audio_url", "video_url"}

// typeMember is the member of a content part that names its type.
var typeMember = []string{"type"}

// Prompt reads the prompt of a GenerateRequest body: its token IDs,
// multimodal items (sorted by offset, the order vLLM's engine keys blocks
// in) and cache salt.
// A body without token IDs, or with features vLLM refuses, is an error:
// features whose modalities, hash and placeholder counts, or kwargs_data
// and mm_metadata lists do not match, placeholders that are empty,
// overlapping or past the prompt's end (package mmfeatures states vLLM's
// rules), or metadata-only items without ec_transfer_params. Routing such
// a request by keys the engine never produces would only send it to an
// arbitrary engine to be refused there.
//
// A body may instead give its multimodal items as raw media, in
// content_parts (a list of objects, or null; vLLM refuses it beside
// features when both are set). When a part's "type" is one of mediaTypes,
// the engine fetches the media, expands its placeholders within token_ids
// and hashes it: the prompt is then marked render.Prompt.RawMedia, which
// routes it by load alone, because from the first item on the engine's
// tokens and block keys are not the body's and the body does not say
// where that item is.
//
// Members are read as vLLM's request model reads them: by their exact
// names, the last of a repeated one winning (jsonscan.Members), so that a
// "Token_IDs" or "Features" vLLM ignores is ignored here too instead of
// routing the request by keys the engine never computes.
func Prompt(body []byte) (render.Prompt, string, error) {
	var v [5][]byte
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
	var parts, media bool
	if v[3] != nil {
		var err error
		if parts, media, err = ContentParts(v[3]); err != nil {
			return render.Prompt{}, "", err
		}
	}
	ec, err := TransferParams(v[4])
	if err != nil {
		return render.Prompt{}, "", err
	}
	if len(ids) == 0 {
		return render.Prompt{}, "", errors.New("token_ids must be a non-empty list of token IDs")
	}
	if parts && features != nil {
		// GenerateRequest._check_mm_fields_exclusive: both set (a
		// non-empty list; features an object, always true) is refused.
		return render.Prompt{}, "", errors.New("content_parts and features are mutually exclusive")
	}
	p := render.Prompt{TokenIDs: ids, RawMedia: media}
	if features != nil {
		items, err := features.Items(len(ids))
		if err == nil {
			err = features.CheckTransfer(ec)
		}
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

// TransferParams reads the JSON value v of a GenerateRequest's
// ec_transfer_params as vLLM's request model types it (dict[str, Any] |
// None; nil v is an absent member) and reports whether it is set as vLLM
// tests it: a non-empty object. Anything but null or an object is refused,
// as vLLM refuses it. The simulated engine's generate route reads it too.
func TransferParams(v []byte) (set bool, err error) {
	if v == nil {
		return false, nil
	}
	s := jsonscan.Scanner{Buf: v}
	if s.Literal("null") {
		return false, nil
	}
	if s.Peek() != '{' {
		return false, errors.New("ec_transfer_params must be an object or null")
	}
	s.Pos++
	s.WS()
	return s.Peek() != '}', nil
}

// ContentParts reads the JSON value v of a GenerateRequest's content_parts
// as vLLM's request model types it (list[dict[str, Any]] | None): whether
// it is a non-empty list, the test vLLM applies before using it, and
// whether a part's "type" (the last member of that exact name, as
// json.loads keeps) is one of mediaTypes, a part vLLM resolves into a
// multimodal item. Anything but null or a list of objects is refused, as
// vLLM refuses it. The simulated engine's generate route reads it too.
func ContentParts(v []byte) (nonEmpty, media bool, err error) {
	s := jsonscan.Scanner{Buf: v}
	if s.Literal("null") {
		return false, false, nil
	}
	if s.Peek() != '[' {
		return false, false, errors.New("content_parts must be a list of objects or null")
	}
	var typ [1][]byte
	err = s.Array(func() error {
		nonEmpty = true
		if s.Peek() != '{' {
			return errors.New("content_parts: each part must be an object")
		}
		start := s.Pos
		if err := s.SkipValue(2, maxPartDepth, math.MaxInt); err != nil {
			return err
		}
		if err := jsonscan.Members(v[start:s.Pos], typeMember, typ[:]); err != nil {
			return err
		}
		var t string
		if typ[0] != nil && json.Unmarshal(typ[0], &t) == nil && slices.Contains(mediaTypes, t) {
			media = true
		}
		return nil
	})
	if err != nil {
		return false, false, fmt.Errorf("content_parts: %w", err)
	}
	return nonEmpty, media, nil
}

// maxPartDepth bounds the nesting ContentParts follows within a part, the
// bound jsonscan.Members applies to the whole body, which has been read
// within it already.
const maxPartDepth = 10000
