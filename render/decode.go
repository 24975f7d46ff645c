package render

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/kvroute/kvroute/internal/jsonids"
)

// Result is the outcome of one render call.
type Result struct {
	// Prompts holds one entry per prompt: several for a completions request
	// with a list of prompts, exactly one otherwise.
	Prompts []Prompt
	// CacheSalt is the request's top-level "cache_salt" when it has one,
	// otherwise the renderer's answer; "" when neither has one. A Messages
	// request's own cache_salt is not used: vLLM's Anthropic request model
	// has none and caches the prompt unsalted, so only the renderer's
	// answer counts (null from vLLM).
	CacheSalt string
	// Endpoint is the ID of the endpoint that answered (the URL with a fixed
	// URL).
	Endpoint string
}

// Prompt is one rendered prompt.
type Prompt struct {
	// TokenIDs are the prompt's token IDs after chat templating and
	// multimodal placeholder expansion, exactly as the engine sees them.
	TokenIDs []uint32
	// Features are the prompt's multimodal items, sorted by Offset, none
	// empty and no two overlapping; nil for a text-only prompt.
	Features []MMFeature
	// RawMedia says that the prompt's multimodal items are raw media the
	// engine resolves by itself, not Features: a token-in request's
	// content_parts (vLLM's GenerateRequest). The engine then fetches the
	// media, expands their placeholders within TokenIDs and keys the
	// blocks they overlap by their hashes, so no key of TokenIDs from the
	// first item on is the engine's, and where that item lies is not
	// known. A router routes a request with such a prompt by load alone.
	// Render answers never set it.
	RawMedia bool

	// tokenJSON is the renderer's token_ids array as it came, kept (with
	// Request.KeepTokenJSON) when it was written exactly as jsonids writes
	// TokenIDs (no whitespace; the decoder rejects every other difference),
	// so that a caller forwarding the IDs as JSON copies these bytes
	// instead of formatting 2,000 numbers again (see AppendTokenJSON); nil
	// otherwise. decoded is TokenIDs as the decoder returned it: the bytes
	// are used only while TokenIDs is still that slice.
	tokenJSON []byte
	decoded   []uint32
}

// AppendTokenJSON appends p.TokenIDs to dst as a JSON array of integers,
// byte for byte as encoding/json writes a non-empty []uint32 ("[1,2,3]"),
// and returns the extended slice. For a prompt the Client rendered with
// Request.KeepTokenJSON, whose renderer sent the array in that form, it
// copies the renderer's bytes rather than formatting the IDs again; that
// holds while TokenIDs is the slice the Client returned and its elements are
// not modified.
func (p *Prompt) AppendTokenJSON(dst []byte) []byte {
	if b := p.rawTokens(); b != nil {
		return append(dst, b...)
	}
	return jsonids.Append(dst, p.TokenIDs)
}

// TokenJSONLen returns the length of what AppendTokenJSON appends.
func (p *Prompt) TokenJSONLen() int {
	if b := p.rawTokens(); b != nil {
		return len(b)
	}
	return jsonids.Len(p.TokenIDs)
}

// rawTokens returns the renderer's bytes of TokenIDs when they still
// describe it: TokenIDs is the slice the decoder returned.
func (p *Prompt) rawTokens() []byte {
	if p.tokenJSON == nil || len(p.TokenIDs) != len(p.decoded) || len(p.TokenIDs) == 0 ||
		unsafe.SliceData(p.TokenIDs) != unsafe.SliceData(p.decoded) {
		return nil
	}
	return p.tokenJSON
}

// MMFeature is one multimodal item of a prompt: its content hash and the
// placeholder tokens it occupies. Routing keys every block an item overlaps
// by the item's hash, because placeholder token IDs are the same for every
// image.
type MMFeature struct {
	// Modality is the item's modality ("image", "audio", "video", ...).
	Modality string
	// Hash is vLLM's mm_hash of the item.
	Hash string
	// Offset is the index of the item's first placeholder token.
	Offset int
	// Length is the number of placeholder tokens.
	Length int
}

// errDecode marks a 2xx body that is not a valid render answer.
var errDecode = errors.New("invalid render response")

// maxOffset bounds placeholder offsets and lengths.
const maxOffset = math.MaxInt32

// decodeResponse decodes a render answer: a JSON array of at most
// maxPrompts GenerateRequest objects when array is set (completions, whose
// request has maxPrompts prompts; a single object is accepted as one
// prompt), one object otherwise. It reads token_ids, features.mm_hashes,
// features.mm_placeholders and cache_salt, and skips everything else. An
// answer with more prompts than the request, or more multimodal items than
// a prompt has tokens, is malformed and refused before it is decoded
// further, so that what the answer allocates stays within a small multiple
// of its size.
//
// res is overwritten; the token arrays of the prompts it held are reused
// when large enough. keepJSON keeps each prompt's token_ids bytes when they
// are compact (Request.KeepTokenJSON).
func decodeResponse(body []byte, array bool, maxPrompts int, keepJSON bool, res *Result) error {
	prev := res.Prompts[:cap(res.Prompts)]
	res.Prompts, res.CacheSalt = res.Prompts[:0], ""
	reuse := func(k int) *Prompt {
		if k < len(prev) {
			return &prev[k]
		}
		return nil
	}
	s := scanner{b: body}
	s.ws()
	salt := ""
	switch {
	case s.peek() == '[' && array:
		s.i++
		s.ws()
		if s.consume(']') {
			return fmt.Errorf("%w: empty array (no prompts rendered)", errDecode)
		}
		for {
			s.ws()
			if len(res.Prompts) >= maxPrompts {
				return fmt.Errorf("%w: %w", errDecode, s.errorf("more prompts than the request's %d", maxPrompts))
			}
			p, sa, err := decodeGenerate(&s, reuse(len(res.Prompts)), keepJSON)
			if err != nil {
				return err
			}
			if salt == "" {
				salt = sa
			}
			res.Prompts = append(res.Prompts, p)
			s.ws()
			if s.consume(',') {
				continue
			}
			if s.consume(']') {
				break
			}
			return fmt.Errorf("%w: %w", errDecode, s.errorf("expected ',' or ']'"))
		}
	case s.peek() == '{':
		p, sa, err := decodeGenerate(&s, reuse(0), keepJSON)
		if err != nil {
			return err
		}
		salt = sa
		res.Prompts = append(res.Prompts, p)
	case s.peek() == '[':
		return fmt.Errorf("%w: expected one object, got an array", errDecode)
	default:
		return fmt.Errorf("%w: %w", errDecode, s.errorf("expected a JSON object or array"))
	}
	if err := s.trailer(); err != nil {
		return fmt.Errorf("%w: %w", errDecode, err)
	}
	res.CacheSalt = salt
	return nil
}

// decodeGenerate decodes one GenerateRequest object; its token IDs (and,
// with keepJSON, their JSON bytes) go into prev's arrays when they are large
// enough.
func decodeGenerate(s *scanner, prev *Prompt, keepJSON bool) (p Prompt, salt string, err error) {
	var toks []uint32
	var raw []byte
	if prev != nil {
		toks, raw = prev.TokenIDs, prev.tokenJSON
	}
	features := -1 // where the last features value starts
	haveTokens := false
	fail := func(err error) (Prompt, string, error) {
		if errors.Is(err, errDecode) {
			return Prompt{}, "", err
		}
		return Prompt{}, "", fmt.Errorf("%w: %w", errDecode, err)
	}
	if !s.consume('{') {
		return fail(s.errorf("expected an object"))
	}
	s.ws()
	if !s.consume('}') {
		for {
			s.ws()
			k, err := s.rawKey()
			if err != nil {
				return fail(err)
			}
			s.ws()
			if !s.consume(':') {
				return fail(s.errorf("expected ':'"))
			}
			s.ws()
			switch string(k) {
			case "token_ids":
				start := s.i
				var compact bool
				p.TokenIDs, compact, err = decodeTokens(s, toks)
				haveTokens = p.TokenIDs != nil
				p.tokenJSON, p.decoded = nil, nil
				if keepJSON && compact && len(p.TokenIDs) > 0 {
					p.tokenJSON, p.decoded = append(raw[:0], s.b[start:s.i]...), p.TokenIDs
				}
			case "features":
				// Decoded once the token count is known, which bounds
				// its items.
				features = s.i
				err = s.skipValue(0)
			case "cache_salt":
				salt, err = nullableString(s)
			default:
				err = s.skipValue(0)
			}
			if err != nil {
				return fail(err)
			}
			s.ws()
			if s.consume(',') {
				continue
			}
			if s.consume('}') {
				break
			}
			return fail(s.errorf("expected ',' or '}'"))
		}
	}
	if !haveTokens {
		return fail(errors.New("missing or null token_ids"))
	}
	if len(p.TokenIDs) == 0 {
		return fail(errors.New("empty token_ids"))
	}
	if features >= 0 {
		fs := scanner{b: s.b, i: features}
		hashes, places, err := decodeFeatures(&fs, len(p.TokenIDs))
		if err == nil {
			p.Features, err = joinFeatures(hashes, places, len(p.TokenIDs))
		}
		if err != nil {
			return fail(err)
		}
	}
	return p, salt, nil
}

// decodeTokens reads token_ids: null or an array of integers in uint32 range,
// with jsonids.List: sized exactly (one allocation, none when reuse is large
// enough) and read eight bytes at a time. compact reports an array without
// whitespace, which is then byte for byte what jsonids.Append writes for the
// IDs.
func decodeTokens(s *scanner, reuse []uint32) (toks []uint32, compact bool, err error) {
	if s.literal("null") {
		return nil, false, nil
	}
	if s.peek() != '[' {
		return nil, false, s.errorf("token_ids: expected an array")
	}
	toks, next, compact, err := jsonids.List(reuse[:0], s.b, s.i)
	if le, ok := err.(*jsonids.ListError); ok { // List's only error
		if le.Index < 0 {
			s.i++
			return nil, false, s.errorf("token_ids: unterminated array")
		}
		s.i = le.At
		return nil, false, s.errorf("token_ids[%d]: not an integer in uint32 range", le.Index)
	}
	s.i = next
	return toks, compact, nil
}

// nullableString reads a string or null ("").
func nullableString(s *scanner) (string, error) {
	if s.literal("null") {
		return "", nil
	}
	return s.str()
}
