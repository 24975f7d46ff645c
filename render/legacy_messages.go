package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kvroute/kvroute/internal/jsonexact"
)

// Chat-completions shapes written by the legacy translations. Field order is
// the JSON order.
type (
	chatRequest struct {
		Model    string        `json:"model,omitempty"`
		Messages []chatMessage `json:"messages"`
		Tools    []any         `json:"tools,omitempty"`
		// ChatTemplateKwargs are the Messages request's, passed on as
		// vLLM's chat translation passes them.
		ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs,omitempty"`
		// AddGenerationPrompt and ContinueFinalMessage are set (false and
		// true) for a Responses request whose last message is partial.
		AddGenerationPrompt  *bool `json:"add_generation_prompt,omitempty"`
		ContinueFinalMessage bool  `json:"continue_final_message,omitempty"`
	}
	chatMessage struct {
		Role       string         `json:"role"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
		Content    any            `json:"content"` // string or []any of parts
		Reasoning  string         `json:"reasoning,omitempty"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	}
	chatTextPart struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	chatImagePart struct {
		Type     string       `json:"type"`
		ImageURL chatImageURL `json:"image_url"`
	}
	chatImageURL struct {
		URL string `json:"url"`
	}
	chatToolCall struct {
		ID       string           `json:"id"`
		Type     string           `json:"type"`
		Function chatFunctionCall `json:"function"`
	}
	chatFunctionCall struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	// chatMessagesTool is the function tool made from an Anthropic tool.
	chatMessagesTool struct {
		Type     string               `json:"type"`
		Function chatMessagesFunction `json:"function"`
	}
	chatMessagesFunction struct {
		Name         string          `json:"name"`
		Parameters   json.RawMessage `json:"parameters"`
		Description  *string         `json:"description,omitempty"`
		Strict       json.RawMessage `json:"strict,omitempty"`
		DeferLoading json.RawMessage `json:"defer_loading,omitempty"`
	}
)

// Anthropic Messages request shapes read by the translation; other fields are
// ignored (they do not change the prompt). They are decoded with jsonexact,
// by exact member names and the last of a repeated one, as vLLM's request
// models read them: a "System" or "Text" vLLM ignores must not reach the
// rendered prompt.
type (
	amRequest struct {
		System   json.RawMessage `json:"system"`
		Messages []amMessage     `json:"messages"`
		Tools    []amTool        `json:"tools"`
		// ChatTemplateKwargs reach the chat template (vLLM's
		// AnthropicMessagesRequest has them, and its translation keeps them).
		ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
	}
	amMessage struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	amBlock struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text"`
		Source    *amSource       `json:"source"`
		Thinking  string          `json:"thinking"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
	}
	amSource struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	amTool struct {
		Type         string          `json:"type"`
		Name         string          `json:"name"`
		Description  *string         `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		Strict       json.RawMessage `json:"strict"`
		DeferLoading json.RawMessage `json:"defer_loading"`
	}
)

// defaultToolCallID replaces a missing tool_use id.
const defaultToolCallID = "call_0000000000"

// billingHeader prefixes the text Claude Code adds to system prompts; it is
// not part of the prompt the model should see.
const billingHeader = "x-anthropic-billing-header"

func untranslatable(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUntranslatable}, args...)...)
}

// translateMessages converts an Anthropic Messages request into a
// chat-completions request.
func translateMessages(body []byte, model string) ([]byte, error) {
	var req amRequest
	if err := jsonexact.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: messages request: %v", ErrInvalidRequest, err)
	}
	out := chatRequest{Model: model, Messages: []chatMessage{}, ChatTemplateKwargs: nonNull(req.ChatTemplateKwargs)}
	if sys, err := translateSystem(req.System); err != nil {
		return nil, err
	} else if sys != nil {
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: sys})
	}
	for i, m := range req.Messages {
		msgs, err := translateAMMessage(m)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		out.Messages = append(out.Messages, msgs...)
	}
	for i, t := range req.Tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, untranslatable("tools[%d]: server tool type %q", i, t.Type)
		}
		if t.Name == "" {
			return nil, untranslatable("tools[%d]: missing name", i)
		}
		params := t.InputSchema
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object"}`)
		}
		out.Tools = append(out.Tools, chatMessagesTool{
			Type: "function",
			Function: chatMessagesFunction{
				Name: t.Name, Parameters: params, Description: t.Description,
				Strict: nonNull(t.Strict), DeferLoading: nonNull(t.DeferLoading),
			},
		})
	}
	return marshalChat(&out)
}

func nonNull(r json.RawMessage) json.RawMessage {
	if string(r) == "null" {
		return nil
	}
	return r
}

// marshalChat encodes without HTML escaping, so that text reaches the
// renderer as the client wrote it.
func marshalChat(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUntranslatable, err)
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// translateSystem turns the top-level system prompt (a string or text
// blocks) into message content; nil when there is none.
func translateSystem(raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		s = stripBillingHeader(s)
		if s == "" {
			return nil, nil
		}
		return s, nil
	}
	var blocks []amBlock
	if err := jsonexact.Unmarshal(raw, &blocks); err != nil {
		return nil, untranslatable("system: must be a string or an array of text blocks")
	}
	var parts []any
	for i, b := range blocks {
		if b.Type != "text" || b.Text == nil {
			return nil, untranslatable("system[%d]: block type %q (only text blocks are supported)", i, b.Type)
		}
		if t := stripBillingHeader(*b.Text); t != "" {
			parts = append(parts, chatTextPart{Type: "text", Text: t})
		}
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return collapse(parts), nil
}

// stripBillingHeader removes Claude Code's billing header line.
func stripBillingHeader(s string) string {
	if !strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), billingHeader) {
		return s
	}
	s = strings.TrimLeft(s, " \t\r\n")
	if nl := strings.IndexByte(s, '\n'); nl >= 0 {
		return strings.TrimLeft(s[nl+1:], "\r\n")
	}
	return ""
}

// collapse returns a single text part as a plain string, other part lists
// as they are.
func collapse(parts []any) any {
	if len(parts) == 1 {
		if t, ok := parts[0].(chatTextPart); ok {
			return t.Text
		}
	}
	if parts == nil {
		return ""
	}
	return parts
}

// translateAMMessage converts one Anthropic message into one or more chat
// messages (tool results become tool messages).
func translateAMMessage(m amMessage) ([]chatMessage, error) {
	switch m.Role {
	case "user", "assistant", "system":
	default:
		return nil, untranslatable("role %q", m.Role)
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []chatMessage{{Role: m.Role, Content: s}}, nil
	}
	var blocks []amBlock
	if err := jsonexact.Unmarshal(m.Content, &blocks); err != nil {
		return nil, untranslatable("content must be a string or an array of blocks")
	}
	var (
		parts      []any
		reasoning  strings.Builder
		calls      []chatToolCall
		toolMsgs   []chatMessage
		toolImages []any
	)
	for i, b := range blocks {
		switch b.Type {
		case "text":
			if b.Text == nil {
				return nil, untranslatable("content[%d]: text block without text", i)
			}
			parts = append(parts, chatTextPart{Type: "text", Text: *b.Text})
		case "image":
			p, err := imagePart(b.Source)
			if err != nil {
				return nil, fmt.Errorf("content[%d]: %w", i, err)
			}
			parts = append(parts, p)
		case "thinking":
			reasoning.WriteString(b.Thinking)
		case "redacted_thinking":
		case "tool_use":
			id := b.ID
			if id == "" {
				id = defaultToolCallID
			}
			args := "{}"
			if len(b.Input) > 0 && string(b.Input) != "null" {
				var err error
				if args, err = pyDumps(b.Input); err != nil {
					return nil, untranslatable("content[%d]: tool_use input: %v", i, err)
				}
			}
			calls = append(calls, chatToolCall{ID: id, Type: "function", Function: chatFunctionCall{Name: b.Name, Arguments: args}})
		case "tool_result":
			texts, images, err := toolResultContent(b.Content)
			if err != nil {
				return nil, fmt.Errorf("content[%d]: %w", i, err)
			}
			if m.Role == "user" {
				toolMsgs = append(toolMsgs, chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: collapse(texts)})
				toolImages = append(toolImages, images...)
				continue
			}
			parts = append(parts, chatTextPart{Type: "text", Text: "Tool result: " + joinTexts(texts)})
			parts = append(parts, images...)
		default:
			return nil, untranslatable("content[%d]: block type %q", i, b.Type)
		}
	}
	out := toolMsgs
	if len(toolImages) > 0 {
		out = append(out, chatMessage{Role: "user", Content: toolImages})
	}
	if len(toolMsgs) > 0 && len(parts) == 0 && reasoning.Len() == 0 && len(calls) == 0 {
		// A user message that held only tool results disappears.
		return out, nil
	}
	return append(out, chatMessage{Role: m.Role, Content: collapse(parts), Reasoning: reasoning.String(), ToolCalls: calls}), nil
}

// imagePart converts an Anthropic image source into an image_url part.
func imagePart(src *amSource) (chatImagePart, error) {
	if src == nil {
		return chatImagePart{}, untranslatable("image block without source")
	}
	switch src.Type {
	case "base64":
		mt := src.MediaType
		if mt == "" {
			mt = "image/jpeg"
		}
		return chatImagePart{Type: "image_url", ImageURL: chatImageURL{URL: "data:" + mt + ";base64," + src.Data}}, nil
	case "url":
		if src.URL == "" {
			return chatImagePart{}, untranslatable("image url source without url")
		}
		return chatImagePart{Type: "image_url", ImageURL: chatImageURL{URL: src.URL}}, nil
	}
	return chatImagePart{}, untranslatable("image source type %q", src.Type)
}

// toolResultContent splits a tool_result's content (a string or text and
// image blocks) into text parts and image parts.
func toolResultContent(raw json.RawMessage) (texts, images []any, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []any{chatTextPart{Type: "text", Text: s}}, nil, nil
	}
	var blocks []amBlock
	if err := jsonexact.Unmarshal(raw, &blocks); err != nil {
		return nil, nil, untranslatable("tool_result content must be a string or an array of blocks")
	}
	for i, b := range blocks {
		switch b.Type {
		case "text":
			if b.Text == nil {
				return nil, nil, untranslatable("tool_result content[%d]: text block without text", i)
			}
			texts = append(texts, chatTextPart{Type: "text", Text: *b.Text})
		case "image":
			p, err := imagePart(b.Source)
			if err != nil {
				return nil, nil, fmt.Errorf("tool_result content[%d]: %w", i, err)
			}
			images = append(images, p)
		default:
			return nil, nil, untranslatable("tool_result content[%d]: block type %q", i, b.Type)
		}
	}
	return texts, images, nil
}

func joinTexts(parts []any) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.(chatTextPart).Text)
	}
	return b.String()
}
