package kvroute

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
)

// vllmAdapter is the adapter vLLM's OpenAI server runs a request as, written
// out from its source for a server whose adapters are named names (with
// --default-mm-loras, the modalities): OpenAIServing._maybe_get_adapters
// keeps the request's own adapter (model names one); otherwise, on the
// routes that pass supports_default_mm_loras (chat completions, and
// Anthropic Messages through its translation into chat completions),
// _get_active_default_mm_loras collects _get_message_types (each list
// content part's "type".split("_")[0]) and takes the one adapter whose name
// is among them, none unless exactly one is. Completions, Responses and
// token-in requests have no "messages" attribute: no types, no adapter.
func vllmAdapter(t *testing.T, api render.API, body string, own string, names []string) string {
	t.Helper()
	if own != "" {
		return own
	}
	var msgs []map[string]any
	switch api {
	case render.APIChatCompletions:
		var req struct {
			Messages []map[string]any `json:"messages"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &req))
		msgs = req.Messages
	case render.APIMessages:
		msgs = anthropicToOpenAI(t, body)
	default:
		return ""
	}
	types := map[string]bool{}
	for _, m := range msgs {
		if parts, ok := m["content"].([]any); ok {
			for _, p := range parts {
				if typ, ok := p.(map[string]any)["type"].(string); ok {
					types[strings.SplitN(typ, "_", 2)[0]] = true
				}
			}
		}
	}
	var matched []string
	for _, n := range names {
		if types[n] {
			matched = append(matched, n)
		}
	}
	if len(matched) == 1 {
		return matched[0]
	}
	return ""
}

// anthropicToOpenAI is AnthropicServingMessages._convert_messages as far as
// the content parts' types go: a system message is dropped, a text block
// with text becomes a "text" part, an image block with a non-empty source
// an "image_url" part; a user's tool_result becomes a tool message, a user
// message of "image_url" parts for its images (a "url" source with an empty
// url gives none) and a tool message of "tool_reference" parts; another
// role's tool_result a "text" part. One text part alone becomes a string.
func anthropicToOpenAI(t *testing.T, body string) []map[string]any {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &req))
	part := func(typ string) any { return map[string]any{"type": typ} }
	var out []map[string]any
	for _, m := range req.Messages {
		if m.Role == "system" {
			continue
		}
		blocks, ok := m.Content.([]any)
		if !ok {
			out = append(out, map[string]any{"role": m.Role, "content": m.Content})
			continue
		}
		var parts []any
		for _, b := range blocks {
			blk := b.(map[string]any)
			switch blk["type"] {
			case "text":
				if s, _ := blk["text"].(string); s != "" {
					parts = append(parts, part("text"))
				}
			case "image":
				if src, _ := blk["source"].(map[string]any); len(src) > 0 {
					parts = append(parts, part("image_url"))
				}
			case "tool_result":
				if m.Role != "user" {
					parts = append(parts, part("text"))
					continue
				}
				out = append(out, map[string]any{"role": "tool", "content": ""})
				var imgs, refs []any
				items, _ := blk["content"].([]any)
				for _, it := range items {
					item, _ := it.(map[string]any)
					switch item["type"] {
					case "image":
						src, _ := item["source"].(map[string]any)
						if u, _ := src["url"].(string); src["type"] != "url" || u != "" {
							imgs = append(imgs, part("image_url"))
						}
					case "tool_reference":
						refs = append(refs, part("tool_reference"))
					}
				}
				if len(imgs) > 0 {
					out = append(out, map[string]any{"role": "user", "content": imgs})
				}
				if len(refs) > 0 {
					out = append(out, map[string]any{"role": "tool", "content": refs})
				}
			}
		}
		msg := map[string]any{"role": m.Role}
		if len(parts) == 1 && parts[0].(map[string]any)["type"] == "text" {
			msg["content"] = "text"
		} else if len(parts) > 0 {
			msg["content"] = parts
		}
		out = append(out, msg)
	}
	return out
}

// chatBody is a chat-completions body of one user message with the given
// content parts (JSON objects).
func chatBody(parts ...string) string {
	return `{"model":"` + testModel + `","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[` + strings.Join(parts, ",") + `]}]}`
}

const (
	partText   = `{"type":"text","text":"what is this?"}`
	partImage  = `{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}`
	partAudio  = `{"type":"audio_url","audio_url":{"url":"https://example.com/a.wav"}}`
	partInput  = `{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}`
	partVideo  = `{"type":"video_url","video_url":{"url":"https://example.com/a.mp4"}}`
	partEmbeds = `{"type":"image_embeds","image_embeds":"AAAA"}`
	partSimple = `{"image_url":"https://example.com/a.png"}`
)

// A request's block keys are rooted where the engine roots its blocks:
// with defaultMMLoRAs set as the engines' --default-mm-loras, a request
// that names no adapter is keyed as the adapter vLLM's OpenAI server runs
// it as (the one modality its content parts name, by vLLM's own rule);
// without the setting, on engines without it, as the base model; a request
// naming its own adapter keeps it either way.
func TestDefaultMMLoRAKeysFollowVLLM(t *testing.T) {
	const bs = 16
	toks := prompt(11, 4*bs)
	engine := map[string]string{"image": "/adapters/vision", "audio": "/adapters/speech"}
	names := []string{"audio", "image"}
	anthropic := func(content string) string {
		return `{"model":"` + testModel + `","max_tokens":8,"messages":[{"role":"user","content":` + content + `}]}`
	}
	imageBlock := `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}`
	cases := []struct {
		name string
		api  render.API
		body string
		own  string
		want string // the adapter vLLM runs the request as; "" for the base model
	}{
		{"text only", render.APIChatCompletions, `{"messages":[{"role":"user","content":"hi"}]}`, "", ""},
		{"text parts", render.APIChatCompletions, chatBody(partText, partText), "", ""},
		{"one image", render.APIChatCompletions, chatBody(partText, partImage), "", "image"},
		{"two images", render.APIChatCompletions, chatBody(partImage, partText, partImage), "", "image"},
		{"image embeds", render.APIChatCompletions, chatBody(partEmbeds), "", "image"},
		{"audio url", render.APIChatCompletions, chatBody(partAudio, partText), "", "audio"},
		{"input_audio names no modality", render.APIChatCompletions, chatBody(partInput, partText), "", ""},
		{"video: no adapter for it", render.APIChatCompletions, chatBody(partVideo), "", ""},
		{"video and image", render.APIChatCompletions, chatBody(partVideo, partImage), "", "image"},
		{"image and audio: two match, none applies", render.APIChatCompletions, chatBody(partImage, partAudio), "", ""},
		{"image and audio in two messages", render.APIChatCompletions,
			`{"messages":[{"role":"user","content":[` + partImage + `]},{"role":"assistant","content":"ok"},{"role":"user","content":[` + partAudio + `]}]}`, "", ""},
		{"a part without a type", render.APIChatCompletions, chatBody(partSimple, partText), "", ""},
		{"the request's own adapter", render.APIChatCompletions, chatBody(partImage), "ad", "ad"},
		{"the request's own adapter, two modalities", render.APIChatCompletions, chatBody(partImage, partAudio), "ad", "ad"},
		{"messages repeated: the last one counts", render.APIChatCompletions,
			`{"messages":[{"role":"user","content":[` + partAudio + `]}],"messages":[{"role":"user","content":[` + partImage + `]}]}`, "", "image"},
		{"content repeated: the last one counts", render.APIChatCompletions,
			`{"messages":[{"role":"user","content":[` + partAudio + `],"content":[` + partImage + `]}]}`, "", "image"},
		{"escaped key and type", render.APIChatCompletions,
			`{"m\u0065ssages":[{"role":"user","content":[{"type":"image\u005furl","image_url":{"url":"x"}}]}]}`, "", "image"},
		{"messages: image block", render.APIMessages, anthropic(`[{"type":"text","text":"what?"},` + imageBlock + `]`), "", "image"},
		{"messages: image block with an empty source", render.APIMessages, anthropic(`[{"type":"image","source":{}}]`), "", ""},
		{"messages: text only", render.APIMessages, anthropic(`[{"type":"text","text":"what?"}]`), "", ""},
		{"messages: image in a user's tool_result", render.APIMessages,
			anthropic(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"},` + imageBlock + `]}]`), "", "image"},
		{"messages: tool_result image with an empty url", render.APIMessages,
			anthropic(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":""}}]}]`), "", ""},
		{"messages: image in an assistant's tool_result", render.APIMessages,
			`{"messages":[{"role":"assistant","content":[{"type":"tool_result","content":[` + imageBlock + `]}]}]}`, "", ""},
		{"messages: image in a system message", render.APIMessages,
			`{"messages":[{"role":"system","content":[` + imageBlock + `]},{"role":"user","content":"hi"}]}`, "", ""},
		{"completions", render.APICompletions, `{"prompt":"hi","messages":[{"content":[` + partImage + `]}]}`, "", ""},
		{"responses", render.APIResponses, `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "", ""},
		{"token-in generate", render.API("generate"), `{"token_ids":[1,2,3],"features":{"mm_hashes":{"image":["h"]}}}`, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := vllmAdapter(t, c.api, c.body, c.own, names)
			require.Equal(t, c.want, want, "the case's expectation is vLLM's")
			root := want
			if root == "" {
				root = testModel
			}
			for _, set := range []bool{false, true} {
				r := testRouter(t, func(cfg *Config) {
					cfg.BlockSize = bs
					if set {
						cfg.DefaultMMLoRAs = engine
					}
				}, Options{})
				req := &Request{API: c.api, Body: []byte(c.body), LoRA: c.own, Prompts: []render.Prompt{{TokenIDs: toks}}}
				s, err := r.Match(context.Background(), req, endpoints(1))
				require.NoError(t, err)
				if set {
					require.Equal(t, engineKeys(root, toks, bs, nil, nil), stages{r}.Keys(s))
					require.Equal(t, want, s.Request().LoRA, "package lora's scorer reads the adapter here")
				} else {
					// An engine without --default-mm-loras runs the request as it names itself.
					require.Equal(t, engineKeys(cmp(c.own, testModel), toks, bs, nil, nil), stages{r}.Keys(s))
					require.Equal(t, c.own, s.Request().LoRA)
				}
				s.Release()
			}
		})
	}
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// End to end through the index: an endpoint holding the blocks a vLLM
// engine with --default-mm-loras stored for an image request (under the
// adapter "image", its image item in the extra keys) matches the request,
// which names no adapter, in full once the router mirrors the setting, and
// not at all without it; the decision names the engine.
func TestDefaultMMLoRARequestMatchesTheEnginesBlocks(t *testing.T) {
	const bs = 16
	toks := prompt(13, 4*bs)
	items := []render.MMFeature{{Modality: "image", Hash: "img", Offset: 20, Length: 30}} // blocks 1-3
	extra := [][]string{nil, {"img"}, {"img"}, {"img"}}
	body := chatBody(partText, partImage)
	for _, set := range []bool{false, true} {
		r := testRouter(t, func(cfg *Config) {
			cfg.BlockSize = bs
			if set {
				cfg.DefaultMMLoRAs = map[string]string{"image": "/adapters/vision"}
			}
		}, Options{})
		eps := endpoints(2)
		require.NoError(t, r.Index().Store(eps[1].ID, &kvindex.StoreEvent{
			EngineHashes: []uint64{1, 2, 3, 4}, Tokens: toks, BlockSize: bs, Model: "image", ExtraKeys: extra, Group: -1,
		}))
		req := &Request{API: render.APIChatCompletions, Body: []byte(body), Prompts: []render.Prompt{{TokenIDs: toks, Features: items}}}
		s, err := r.Match(context.Background(), req, eps)
		require.NoError(t, err)
		want := 0
		if set {
			want = 4
		}
		require.Equal(t, want, s.Candidate(1).Match.Blocks, "defaultMMLoRAs set: %v", set)
		best, _ := s.Score()
		if set {
			require.Equal(t, 1, best, "the engine holding the blocks")
		}
		s.Release()
	}
}

// The setting loads from JSON under its name, off by default; an empty
// modality or path, a modality with "_" (vLLM never matches it) and more
// than 64 entries are refused.
func TestDefaultMMLoRAConfig(t *testing.T) {
	require.Empty(t, DefaultConfig().DefaultMMLoRAs)
	c, err := LoadConfig(strings.NewReader(`{"model":"m","defaultMMLoRAs":{"image":"/adapters/vision"}}`))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"image": "/adapters/vision"}, c.DefaultMMLoRAs)
	var many []string
	for i := range 65 {
		many = append(many, fmt.Sprintf(`"m%d":"/p"`, i))
	}
	for doc, msg := range map[string]string{
		`{"defaultMMLoRAs":{"":"/p"}}`:                         "must be non-empty",
		`{"defaultMMLoRAs":{"image":""}}`:                      "must be non-empty",
		`{"defaultMMLoRAs":{"image_url":"/p"}}`:                "never applies",
		`{"defaultMMLoRAs":{` + strings.Join(many, ",") + `}}`: "more than 64",
		`{"defaultMMLoRA":{"image":"/p"}}`:                     "defaultMMLoRA",
	} {
		_, err := LoadConfig(strings.NewReader(doc))
		require.ErrorIs(t, err, ErrInvalidConfig, doc)
		require.ErrorContains(t, err, msg, doc)
	}
}

// A malformed body names no modality and routes as the base model (the
// engine refuses it anyway); the scan does not panic on truncated input.
func TestDefaultMMLoRAMalformedBody(t *testing.T) {
	mods := []string{"audio", "image"}
	body := chatBody(partImage)
	for i := range len(body) {
		_ = chatPartModalities([]byte(body[:i]), mods)
		_ = messagesPartModalities([]byte(body[:i]), mods)
	}
	require.Zero(t, chatPartModalities([]byte(`{"messages":[{"content":[`+partImage+`]}`), mods))
	require.Zero(t, chatPartModalities([]byte(strings.Repeat("[", 1000)), mods))
	require.NotZero(t, chatPartModalities([]byte(body), mods))
}

// The body scan builds no values: with the setting on, reading a request's
// content parts allocates nothing.
func TestDefaultMMLoRAScanDoesNotAllocate(t *testing.T) {
	mods := []string{"audio", "image"}
	chat := []byte(chatBody(partText, partImage, partAudio, partInput))
	msgs := []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"x"},` +
		`{"type":"tool_result","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}]}`)
	require.Zero(t, testing.AllocsPerRun(50, func() { chatPartModalities(chat, mods) }))
	require.Zero(t, testing.AllocsPerRun(50, func() { messagesPartModalities(msgs, mods) }))
	require.Equal(t, uint64(3), chatPartModalities(chat, mods))
	require.Equal(t, uint64(2), messagesPartModalities(msgs, mods))
}
