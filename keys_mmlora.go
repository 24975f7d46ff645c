package kvroute

import (
	"bytes"
	"math"
	"sort"

	"github.com/kvroute/kvroute/internal/jsonscan"
	"github.com/kvroute/kvroute/render"
)

// maxDefaultMMLoRAs bounds Config.DefaultMMLoRAs: the modalities a body
// names are kept as a bit set of the configured ones.
const maxDefaultMMLoRAs = 64

// maxMMScanDepth bounds the nesting the body scan follows, so that a hostile
// body cannot exhaust the stack (the gateway's body scan has the same bound).
const maxMMScanDepth = 512

// defaultMMLoRAModalities returns the modalities of Config.DefaultMMLoRAs,
// sorted: the names vLLM gives its default multimodal adapters.
func defaultMMLoRAModalities(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	mods := make([]string, 0, len(m))
	for k := range m {
		mods = append(mods, k)
	}
	sort.Strings(mods)
	return mods
}

// applyDefaultMMLoRA sets req.LoRA to the default multimodal adapter vLLM
// attaches to req (Config.DefaultMMLoRAs), if any. vLLM's OpenAI server
// does so (OpenAIServing._maybe_get_adapters with supports_default_mm_loras)
// only for a request whose model names no adapter, and only by the content
// parts of a chat-completions body (_get_message_types: each part's "type"
// up to its first "_", "image_url" → "image"), matched against its
// adapters' names, which for --default-mm-loras are the modalities; it
// attaches one only when exactly one name matches. Its Anthropic Messages
// route translates the body into chat completions first, an image block
// becoming an "image_url" part. Completions, Responses and token-in
// requests carry no "messages" parts and never get one.
func (r *Router) applyDefaultMMLoRA(req *Request) {
	if len(r.mmLoRAs) == 0 || req.LoRA != "" || len(req.Body) == 0 {
		return
	}
	var mask uint64
	switch req.API {
	case render.APIChatCompletions:
		mask = chatPartModalities(req.Body, r.mmLoRAs)
	case render.APIMessages:
		mask = messagesPartModalities(req.Body, r.mmLoRAs)
	default:
		return
	}
	if mask != 0 && mask&(mask-1) == 0 { // exactly one
		for i := range r.mmLoRAs {
			if mask == 1<<i {
				req.LoRA = r.mmLoRAs[i]
				return
			}
		}
	}
}

// partBit returns the bit of mods naming the modality vLLM reads from a
// content part's type: the type up to its first "_".
func partBit(typ []byte, mods []string) uint64 {
	p, _, _ := bytes.Cut(typ, []byte("_"))
	for i, m := range mods {
		if m == string(p) {
			return 1 << i
		}
	}
	return 0
}

// bodyScan walks a request body for the content parts' types, building no
// values. A body it cannot read names no modality: vLLM refuses it anyway.
type bodyScan struct {
	jsonscan.Scanner
	mods []string
}

// members calls member for each member of the object at Pos, with its key
// (valid until the next call) and Pos at its value; member must move past
// the value.
func (b *bodyScan) members(member func(key []byte) error) error {
	b.WS()
	return b.Object(func(ks, ke int, esc bool) error {
		key, err := b.unquote(ks, ke, esc)
		if err != nil {
			return err
		}
		return member(key)
	})
}

func (b *bodyScan) skip(depth int) error { return b.SkipValue(depth, maxMMScanDepth, math.MaxInt) }

// str reads the string at Pos (valid until the next read), or moves past a
// value of another kind and returns nil. depth is the value's.
func (b *bodyScan) str(depth int) ([]byte, error) {
	if b.Peek() != '"' {
		return nil, b.skip(depth)
	}
	vs := b.Pos
	esc, err := b.SkipString()
	if err != nil {
		return nil, err
	}
	return b.unquote(vs, b.Pos, esc)
}

// unquote returns the string from start to end, without its quotes: a span
// of the body, or, when it holds escapes, its decoded bytes.
func (b *bodyScan) unquote(start, end int, esc bool) ([]byte, error) {
	if !esc {
		return b.Buf[start+1 : end-1], nil
	}
	s, err := jsonscan.Unquote(b.Buf[start:end])
	return []byte(s), err
}

// topMessages returns what messages found in the body's top-level
// "messages" member (the last one when repeated, as Python's json keeps).
func (b *bodyScan) topMessages(messages func() (uint64, error)) uint64 {
	var mask uint64
	err := b.members(func(key []byte) error {
		if string(key) != "messages" {
			return b.skip(2)
		}
		if b.Peek() != '[' {
			mask = 0
			return b.skip(2)
		}
		var err error
		mask, err = messages()
		return err
	})
	if err != nil {
		return 0
	}
	return mask
}

// chatPartModalities returns the bits of mods that a chat-completions body
// names, as vLLM's _get_message_types reads it: every message's "content",
// when a list, and in it every part's "type" up to its first "_".
func chatPartModalities(body []byte, mods []string) uint64 {
	b := &bodyScan{Scanner: jsonscan.Scanner{Buf: body}, mods: mods}
	return b.topMessages(func() (uint64, error) {
		var mask uint64
		err := b.Array(func() error {
			if b.Peek() != '{' {
				return b.skip(3)
			}
			var msg uint64 // the last "content" member's
			err := b.members(func(key []byte) error {
				if string(key) != "content" {
					return b.skip(4)
				}
				msg = 0
				if b.Peek() != '[' {
					return b.skip(4)
				}
				return b.Array(func() error {
					if b.Peek() != '{' {
						return b.skip(5)
					}
					var part uint64 // the last "type" member's
					err := b.members(func(key []byte) error {
						if string(key) != "type" {
							return b.skip(6)
						}
						typ, err := b.str(6)
						part = partBit(typ, b.mods)
						return err
					})
					msg |= part
					return err
				})
			})
			mask |= msg
			return err
		})
		return mask, err
	})
}

// messagesPartModalities returns the bits of mods that an Anthropic
// Messages body names once vLLM has translated it into chat completions
// (AnthropicServingMessages._convert_messages): an "image" block with a
// non-empty "source", in a message whose role is not "system", becomes an
// "image_url" part, and so does an "image" item of a user's "tool_result"
// block whose source gives a URL (a base64 source always does; a "url"
// source when its "url" is not empty). Those are the only parts of the
// translation that name a media modality: a "text" or "tool" entry of
// Config.DefaultMMLoRAs, which vLLM would also match against the text and
// tool_reference parts it builds, is not applied to Messages bodies.
func messagesPartModalities(body []byte, mods []string) uint64 {
	bit := partBit([]byte("image_url"), mods)
	if bit == 0 {
		return 0
	}
	b := &bodyScan{Scanner: jsonscan.Scanner{Buf: body}, mods: mods}
	return b.topMessages(func() (uint64, error) {
		var mask uint64
		err := b.Array(func() error {
			if b.Peek() != '{' {
				return b.skip(3)
			}
			var system, user bool     // the last "role" member's
			var image, toolImage bool // of the last "content" member
			err := b.members(func(key []byte) error {
				switch string(key) {
				case "role":
					s, err := b.str(4)
					system, user = string(s) == "system", string(s) == "user"
					return err
				case "content":
					image, toolImage = false, false
					if b.Peek() != '[' {
						return b.skip(4)
					}
					return b.Array(func() error {
						if b.Peek() != '{' {
							return b.skip(5)
						}
						img, tool, err := b.anthropicBlock(5)
						image = image || img
						toolImage = toolImage || tool
						return err
					})
				}
				return b.skip(4)
			})
			if !system && (image || user && toolImage) {
				mask = bit
			}
			return err
		})
		return mask, err
	})
}

// anthropicBlock reads one content block (depth is its own): whether it is
// an image block with a non-empty source, and whether it is a tool_result
// whose content lists an image item with a URL.
func (b *bodyScan) anthropicBlock(depth int) (image, toolImage bool, err error) {
	var isImage, isToolResult bool // of the last "type" member
	var source, listImage bool     // of the last "source" and "content" members
	err = b.members(func(key []byte) error {
		switch string(key) {
		case "type":
			s, err := b.str(depth + 1)
			isImage, isToolResult = string(s) == "image", string(s) == "tool_result"
			return err
		case "source":
			source = false
			if b.Peek() != '{' {
				return b.skip(depth + 1)
			}
			return b.members(func([]byte) error {
				source = true // a dict is truthy when it has a member
				return b.skip(depth + 2)
			})
		case "content":
			listImage = false
			if b.Peek() != '[' {
				return b.skip(depth + 1)
			}
			return b.Array(func() error {
				if b.Peek() != '{' {
					return b.skip(depth + 2)
				}
				ok, err := b.toolResultImage(depth + 2)
				listImage = listImage || ok
				return err
			})
		}
		return b.skip(depth + 1)
	})
	return isImage && source, isToolResult && listImage, err
}

// toolResultImage reads one item of a tool_result's content list: whether
// it is an image whose source gives a URL.
func (b *bodyScan) toolResultImage(depth int) (bool, error) {
	isImage := false // of the last "type" member
	url := true      // no "source" member: vLLM builds a base64 data URL
	err := b.members(func(key []byte) error {
		switch string(key) {
		case "type":
			s, err := b.str(depth + 1)
			isImage = string(s) == "image"
			return err
		case "source":
			url = true
			if b.Peek() != '{' {
				return b.skip(depth + 1)
			}
			isURL, u := false, false
			err := b.members(func(key []byte) error {
				switch string(key) {
				case "type":
					s, err := b.str(depth + 2)
					isURL = string(s) == "url"
					return err
				case "url":
					s, err := b.str(depth + 2)
					u = len(s) > 0
					return err
				}
				return b.skip(depth + 2)
			})
			url = !isURL || u
			return err
		}
		return b.skip(depth + 1)
	})
	return isImage && url, err
}
