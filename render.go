package kvroute

import (
	"bytes"
	"context"
	"errors"

	"github.com/kvroute/kvroute/internal/jsonscan"
	"github.com/kvroute/kvroute/render"
)

// errRenderDisabled is the render error of a request without prompts when
// rendering is disabled.
var errRenderDisabled = errors.New("kvroute: rendering disabled and the request carries no prompts")

// errPromptEmbeds is the render error of a completions request carrying
// prompt_embeds. vLLM keys every block of such a prompt with the SHA-256
// of the block's embeddings among its extra keys (and, without token IDs,
// zeros as its tokens), which the router cannot compute from the body, and
// its render endpoint answers no token IDs for it; the request is routed by
// load without asking the renderer.
var errPromptEmbeds = errors.New("kvroute: the request carries prompt_embeds, whose blocks the engine keys by hashes of the embeddings")

// errRawMedia is the render error of a request whose given prompt carries
// its multimodal items as raw media (render.Prompt.RawMedia: a token-in
// request's content_parts). The engine fetches the media, expands their
// placeholders within the token IDs and keys the blocks they overlap by
// their hashes, none of which the request gives, so the router could key
// only the blocks before the first item, and does not know where that
// item lies: the request is routed by load, and none of its keys is
// looked up or speculated (a guess the engine never confirms would draw
// the next request with the same token IDs and other media).
var errRawMedia = errors.New("kvroute: the prompt's multimodal items are raw media the engine resolves itself")

// promptEmbedsMember is the completions member hasPromptEmbeds looks for.
var promptEmbedsMember = []string{"prompt_embeds"}

// hasPromptEmbeds reports whether a completions body has a top-level
// "prompt_embeds" (the last one when repeated, by its exact name once its
// escapes are decoded, as vLLM's CompletionRequest reads it after
// json.loads) that is neither null nor an empty list. A body that can hold
// the name neither plainly nor escaped skips the scan; a malformed body is
// left to the renderer to refuse.
func hasPromptEmbeds(api render.API, body []byte) bool {
	return api == render.APICompletions && mayNamePromptEmbeds(body) && carriesPromptEmbeds(body)
}

// carriesPromptEmbeds is hasPromptEmbeds's scan of the body: its last
// top-level prompt_embeds, by exact name, is neither null nor empty.
func carriesPromptEmbeds(body []byte) bool {
	var v [1][]byte
	if jsonscan.Members(body, promptEmbedsMember, v[:]) != nil || v[0] == nil {
		return false
	}
	s := jsonscan.Scanner{Buf: v[0]}
	if s.Literal("null") {
		return false
	}
	if s.Consume('[') {
		s.WS()
		return !s.Consume(']')
	}
	return true
}

// mayNamePromptEmbeds reports whether body, if it is valid JSON, can have a
// member named prompt_embeds: a name spelled so, or one short enough that
// holds an escape (json.loads decodes "prompt\u005fembeds" before vLLM
// compares names). It looks only before colons: a name is the string a
// colon follows, and within a JSON string a quote is always escaped, so a
// colon in text is told apart by the byte before it. An ordinary body
// costs a byte search per colon and no scan of its text or its escapes.
func mayNamePromptEmbeds(body []byte) bool {
	const maxName = 6 * len("prompt_embeds") // every letter escaped (\u0070)
	for i := 0; ; i++ {
		j := bytes.IndexByte(body[i:], ':')
		if j < 0 {
			return false
		}
		i += j
		end := i // the name's closing quote, before any whitespace
		for end > 0 && isJSONSpace(body[end-1]) {
			end--
		}
		end--
		if end < 0 || body[end] != '"' || escapedAt(body, end) {
			continue // a colon within a string
		}
		lo := max(0, end-maxName-1)
		start := bytes.LastIndexByte(body[lo:end], '"')
		if start < 0 {
			continue // a name too long to be prompt_embeds
		}
		name := body[lo+start+1 : end]
		if string(name) == promptEmbedsMember[0] || bytes.IndexByte(name, '\\') >= 0 {
			return true
		}
	}
}

// isJSONSpace reports whether c is JSON whitespace.
func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// escapedAt reports whether body[i] follows an odd run of backslashes: an
// escaped byte within a JSON string.
func escapedAt(body []byte, i int) bool {
	n := 0
	for i > 0 && body[i-1] == '\\' {
		i--
		n++
	}
	return n%2 == 1
}

// render is the render stage: the request's prompts (given, or the render
// client's answer), its cache salt and the render failure, if any. After
// a failure the request is routed by load alone (counted once routed:
// countFallback), unless ctx has ended: then the caller is gone and render
// returns ctx's error.
func (s *Selection) render(ctx context.Context) error {
	s.prompts, s.salt, s.renderErr = s.r.prompts(ctx, s.req, &s.st)
	if s.renderErr == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.r.log.Debug("render failed; routing by load alone", "request", s.req.ID, "err", s.renderErr)
	return nil
}

// prompts returns the request's prompts: the given ones, or the render
// client's answer. The returned slice is valid until st is reused.
func (r *Router) prompts(ctx context.Context, req *Request, st *pickState) ([]render.Prompt, string, error) {
	if len(req.Prompts) > 0 {
		for i := range req.Prompts {
			if req.Prompts[i].RawMedia {
				return nil, "", errRawMedia
			}
		}
		return req.Prompts, req.CacheSalt, nil
	}
	if r.render == nil {
		return nil, "", errRenderDisabled
	}
	if hasPromptEmbeds(req.API, req.Body) {
		return nil, "", errPromptEmbeds
	}
	auth := ""
	if req.Header != nil {
		auth = req.Header.Get("Authorization")
	}
	// The scratch's render result is reused, so that its token arrays are:
	// a 2,000-token prompt then costs no 8 KB array per request.
	res := &st.renderRes
	model := req.Model
	if model == "" {
		model = r.cfg.Model
	}
	if err := r.render.RenderInto(ctx, &render.Request{API: req.API, Body: req.Body, Authorization: auth, Model: model,
		KeepTokenJSON: req.KeepPrompts}, res); err != nil {
		return nil, "", err
	}
	// The render's salt only (Request.CacheSalt): the engine salts the
	// prompt with what the body says, which the renderer read.
	return res.Prompts, res.CacheSalt, nil
}
