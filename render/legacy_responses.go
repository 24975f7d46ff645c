package render

import (
	"encoding/json"
	"fmt"

	"github.com/kvroute/kvroute/internal/jsonexact"
)

// OpenAI Responses request shapes read by the translation; other fields are
// ignored (they do not change the prompt). They are decoded with jsonexact,
// by exact member names and the last of a repeated one, as vLLM's request
// models read them.
type (
	rsRequest struct {
		Instructions json.RawMessage `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		Tools        []rsTool        `json:"tools"`
	}
	rsItem struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Status  string          `json:"status"`
	}
	rsPart struct {
		Type     string          `json:"type"`
		Text     *string         `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
	}
	rsTool struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	// chatResponsesTool is the function tool made from a flat Responses tool.
	chatResponsesTool struct {
		Type     string                `json:"type"`
		Function chatResponsesFunction `json:"function"`
	}
	chatResponsesFunction struct {
		Name        string          `json:"name"`
		Description *string         `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
)

// translateResponses converts an OpenAI Responses request into a
// chat-completions request. Any item or part it cannot
// translate fails the whole conversion rather than rendering a shorter
// prompt.
func translateResponses(body []byte, model string) ([]byte, error) {
	var req rsRequest
	if err := jsonexact.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: responses request: %v", ErrInvalidRequest, err)
	}
	out := chatRequest{Model: model, Messages: []chatMessage{}}
	if len(req.Instructions) > 0 && string(req.Instructions) != "null" {
		var s string
		if err := json.Unmarshal(req.Instructions, &s); err != nil {
			return nil, untranslatable("instructions must be a string")
		}
		// vLLM adds instructions only when they are a non-empty string.
		if s != "" {
			out.Messages = append(out.Messages, chatMessage{Role: "system", Content: s})
		}
	}
	var s string
	switch {
	case len(req.Input) == 0 || string(req.Input) == "null":
		return nil, untranslatable("missing input")
	case json.Unmarshal(req.Input, &s) == nil:
		out.Messages = append(out.Messages, chatMessage{Role: "user", Content: s})
	default:
		var items []rsItem
		if err := jsonexact.Unmarshal(req.Input, &items); err != nil {
			return nil, untranslatable("input must be a string or an array of messages")
		}
		for i, it := range items {
			m, err := translateRSItem(it)
			if err != nil {
				return nil, fmt.Errorf("input[%d]: %w", i, err)
			}
			out.Messages = append(out.Messages, m)
		}
		// vLLM continues a partial last message instead of opening a new
		// turn after it (should_continue_final_message).
		if n := len(items); n > 0 && (items[n-1].Status == "in_progress" || items[n-1].Status == "incomplete") {
			out.AddGenerationPrompt, out.ContinueFinalMessage = new(false), true
		}
	}
	for i, t := range req.Tools {
		if t.Type != "function" {
			return nil, untranslatable("tools[%d]: tool type %q (only function tools are supported)", i, t.Type)
		}
		if t.Name == "" {
			return nil, untranslatable("tools[%d]: missing name", i)
		}
		out.Tools = append(out.Tools, chatResponsesTool{
			Type:     "function",
			Function: chatResponsesFunction{Name: t.Name, Description: t.Description, Parameters: nonNull(t.Parameters)},
		})
	}
	return marshalChat(&out)
}

// translateRSItem converts one input item, which must be a message.
func translateRSItem(it rsItem) (chatMessage, error) {
	if it.Type != "" && it.Type != "message" {
		return chatMessage{}, untranslatable("item type %q", it.Type)
	}
	switch it.Role {
	case "user", "assistant", "system", "developer":
	case "":
		return chatMessage{}, untranslatable("item without role")
	default:
		return chatMessage{}, untranslatable("role %q", it.Role)
	}
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return chatMessage{Role: it.Role, Content: s}, nil
	}
	var parts []rsPart
	if err := jsonexact.Unmarshal(it.Content, &parts); err != nil {
		return chatMessage{}, untranslatable("content must be a string or an array of parts")
	}
	var out []any
	for i, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			if p.Text == nil {
				return chatMessage{}, untranslatable("content[%d]: %s part without text", i, p.Type)
			}
			out = append(out, chatTextPart{Type: "text", Text: *p.Text})
		case "input_image":
			var url string
			if err := json.Unmarshal(p.ImageURL, &url); err != nil || url == "" {
				return chatMessage{}, untranslatable("content[%d]: input_image without a string image_url", i)
			}
			out = append(out, chatImagePart{Type: "image_url", ImageURL: chatImageURL{URL: url}})
		default:
			return chatMessage{}, untranslatable("content[%d]: part type %q", i, p.Type)
		}
	}
	return chatMessage{Role: it.Role, Content: collapse(out)}, nil
}
