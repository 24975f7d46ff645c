package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// legacyRoles are the roles a translated chat-completions body may hold.
var legacyRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// FuzzLegacyTranslation feeds arbitrary client bodies to the Messages and
// Responses translations of legacy mode (seed corpus in
// testdata/fuzz/FuzzLegacyTranslation): they never panic; a refusal is
// ErrInvalidRequest or ErrUntranslatable, and malformed JSON is always
// ErrInvalidRequest; a body they accept becomes one chat-completions
// object, the same bytes every time, no more than a bounded multiple of
// the body's size, naming the model, with a list of messages whose roles
// and content parts chat completions knows; and a Responses body gives one
// message for each input item, plus one for its instructions.
func FuzzLegacyTranslation(f *testing.F) {
	for _, s := range []string{
		`{"system":"be brief","messages":[{"role":"user","content":"hi"}]}`,
		`{"system":[{"type":"text","text":"x-anthropic-billing-header: a\nrest"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"url","url":"u"}}]}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"c","name":"f","input":{"b":1E400,"a":"\ud800"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c","content":[{"type":"text","text":"ok"},{"type":"image","source":{"type":"base64","data":"AA=="}}]}]}],` +
			`"tools":[{"name":"f","input_schema":null,"strict":true}]}`,
		`{"messages":[{"role":"user","content":"a"}],"Messages":[],"messages":[{"role":"tool","content":"x"}]}`,
	} {
		f.Add([]byte(s), false)
	}
	for _, s := range []string{
		`{"instructions":"be brief","input":"hi"}`,
		`{"input":[{"role":"developer","content":"d"},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"u"}]}],` +
			`"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`,
		`{"input":[{"type":"function_call","call_id":"c"}]}`,
		`{"input":null}`,
	} {
		f.Add([]byte(s), true)
	}
	f.Add([]byte(`{"messages":[`), false)
	f.Add([]byte(`[]`), true)
	f.Fuzz(func(t *testing.T, body []byte, responses bool) {
		translate := translateMessages
		if responses {
			translate = translateResponses
		}
		out, err := translate(body, "m")
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) && !errors.Is(err, ErrUntranslatable) {
				t.Fatalf("%q: error %v is neither ErrInvalidRequest nor ErrUntranslatable", body, err)
			}
			if !json.Valid(body) && !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("%q: malformed body refused with %v, not ErrInvalidRequest", body, err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("%q: malformed body translated to %s", body, out)
		}
		if again, err := translate(body, "m"); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("%q: second translation %s (%v) differs from %s", body, again, err, out)
		}
		// Python-style escapes write a 4-byte character as 12 bytes, written
		// again inside a JSON string; defaults add a few dozen bytes to an
		// empty block.
		if len(out) > 16*len(body)+256 {
			t.Fatalf("%d-byte body translated to %d bytes: %s", len(body), len(out), out)
		}
		var chat struct {
			Model    *string `json:"model"`
			Messages *[]struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(out, &chat); err != nil {
			t.Fatalf("%q: translation %s: %v", body, out, err)
		}
		if chat.Model == nil || *chat.Model != "m" || chat.Messages == nil {
			t.Fatalf("%q: translation %s lacks the model or the messages", body, out)
		}
		for i, m := range *chat.Messages {
			if !legacyRoles[m.Role] {
				t.Fatalf("%q: message %d of %s has role %q", body, i, out, m.Role)
			}
			checkChatContent(t, body, m.Content)
		}
		if responses {
			checkResponsesCount(t, body, len(*chat.Messages))
		}
	})
}

// checkChatContent fails unless content is a string or a list of text and
// image_url parts.
func checkChatContent(t *testing.T, body, content []byte) {
	t.Helper()
	var s string
	if json.Unmarshal(content, &s) == nil {
		return
	}
	var parts []struct {
		Type     string  `json:"type"`
		Text     *string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(content, &parts); err != nil {
		t.Fatalf("%q: content %s is neither a string nor parts: %v", body, content, err)
	}
	for _, p := range parts {
		ok := (p.Type == "text" && p.Text != nil) || (p.Type == "image_url" && p.ImageURL != nil && p.ImageURL.URL != "")
		if !ok {
			t.Fatalf("%q: content %s holds a part chat completions does not know", body, content)
		}
	}
}

// checkResponsesCount fails unless a Responses body translated into n
// messages: one for the instructions when set and not empty, and one for the input
// string or for each input item.
func checkResponsesCount(t *testing.T, body []byte, n int) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("%q: accepted, but not an object: %v", body, err)
	}
	want := 0
	if in := top["instructions"]; len(in) > 0 && string(in) != "null" && string(in) != `""` {
		want++
	}
	var items []json.RawMessage
	if json.Unmarshal(top["input"], &items) == nil {
		want += len(items)
	} else {
		want++
	}
	if n != want {
		t.Fatalf("%q: translated into %d messages, want %d", body, n, want)
	}
}
