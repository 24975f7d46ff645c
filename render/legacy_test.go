package render

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the legacy translation golden files")

// TestLegacyTranslationGolden translates every testdata/legacy/*.in.json and
// compares the chat-completions body with *.want.json byte for byte (the
// golden files are the output indented with json.Indent, which keeps key
// order and string escapes as they are).
func TestLegacyTranslationGolden(t *testing.T) {
	ins, err := filepath.Glob("testdata/legacy/*.in.json")
	require.NoError(t, err)
	require.NotEmpty(t, ins)
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(in)
			require.NoError(t, err)
			var out []byte
			if strings.HasPrefix(name, "messages") {
				out, err = translateMessages(body, "qwen3-8b")
			} else {
				out, err = translateResponses(body, "qwen3-8b")
			}
			require.NoError(t, err)
			require.True(t, json.Valid(out), "%s", out)
			var pretty bytes.Buffer
			require.NoError(t, json.Indent(&pretty, out, "", "  "))
			pretty.WriteByte('\n')
			want := strings.TrimSuffix(in, ".in.json") + ".want.json"
			if *update {
				require.NoError(t, os.WriteFile(want, pretty.Bytes(), 0o644))
			}
			golden, err := os.ReadFile(want)
			require.NoError(t, err)
			require.Equal(t, string(golden), pretty.String())
		})
	}
}

func TestLegacyMessagesToolArgumentsArePythonFormatted(t *testing.T) {
	body := `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"x","name":"f","input":{"b":"Zürich 🎉","a":[1.0,2]}}]}]}`
	out, err := translateMessages([]byte(body), "m")
	require.NoError(t, err)
	var got struct {
		Messages []struct {
			ToolCalls []struct {
				Function struct{ Arguments string }
			} `json:"tool_calls"`
		}
	}
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, `{"b": "Z\u00fcrich \ud83c\udf89", "a": [1.0, 2]}`, got.Messages[0].ToolCalls[0].Function.Arguments)
}

func TestLegacyTranslationRejectsWhatItCannotTranslate(t *testing.T) {
	messages := map[string]string{
		"document block":     `{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"x"}}]}]}`,
		"search result":      `{"messages":[{"role":"user","content":[{"type":"search_result","content":[]}]}]}`,
		"server tool use":    `{"messages":[{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]}]}`,
		"unknown role":       `{"messages":[{"role":"tool","content":"x"}]}`,
		"file image source":  `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`,
		"server tool":        `{"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[]}`,
		"non-text system":    `{"system":[{"type":"image","source":{"type":"url","url":"u"}}],"messages":[]}`,
		"document in result": `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document"}]}]}]}`,
		"content number":     `{"messages":[{"role":"user","content":5}]}`,
		"invalid tool input": `{"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"f","input":` + strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2) + `}]}]}`,
	}
	for name, body := range messages {
		t.Run("messages/"+name, func(t *testing.T) {
			_, err := translateMessages([]byte(body), "m")
			require.ErrorIs(t, err, ErrUntranslatable)
		})
	}
	responses := map[string]string{
		"function_call item":        `{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`,
		"function_call_output item": `{"input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`,
		"reasoning item":            `{"input":[{"type":"reasoning","summary":[]}]}`,
		"input_audio part":          `{"input":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`,
		"input_file part":           `{"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`,
		"image by file_id":          `{"input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`,
		"refusal part":              `{"input":[{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}]}`,
		"item without role":         `{"input":[{"content":"x"}]}`,
		"non-function tool":         `{"input":"x","tools":[{"type":"web_search"}]}`,
		"missing input":             `{"instructions":"x"}`,
		"non-string instructions":   `{"instructions":[{"role":"system","content":"x"}],"input":"x"}`,
	}
	for name, body := range responses {
		t.Run("responses/"+name, func(t *testing.T) {
			_, err := translateResponses([]byte(body), "m")
			require.ErrorIs(t, err, ErrUntranslatable)
		})
	}
	_, err := translateMessages([]byte(`[`), "m")
	require.ErrorIs(t, err, ErrInvalidRequest)
}

// The translations read a body's members as vLLM's request models do: a
// case variant is an unknown member (ignored), and of a repeated name the
// last wins outright. Each body translates as its plain equivalent does.
func TestLegacyTranslationReadsMembersAsVLLM(t *testing.T) {
	messages := []struct{ name, body, plain string }{
		{"case variant of system", `{"System":"be brief","messages":[{"role":"user","content":"hi"}]}`,
			`{"messages":[{"role":"user","content":"hi"}]}`},
		{"case variant of messages", `{"messages":[{"role":"user","content":"hi"}],"Messages":[{"role":"user","content":"other"}]}`,
			`{"messages":[{"role":"user","content":"hi"}]}`},
		{"case variant of text", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi","Text":"other"}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		{"case variant of tools", `{"messages":[{"role":"user","content":"hi"}],"TOOLS":[{"name":"f","input_schema":{"type":"object"}}]}`,
			`{"messages":[{"role":"user","content":"hi"}]}`},
		{"repeated messages: no element reused", `{"messages":[{"role":"user","content":"a"}],"messages":[{"content":"hi"}]}`,
			`{"messages":[{"content":"hi"}]}`},
		{"repeated tools: no element reused", `{"messages":[],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}],"tools":[{"name":"g"}]}`,
			`{"messages":[],"tools":[{"name":"g"}]}`},
	}
	for _, c := range messages {
		t.Run("messages/"+c.name, func(t *testing.T) {
			want, werr := translateMessages([]byte(c.plain), "m")
			got, err := translateMessages([]byte(c.body), "m")
			require.Equal(t, werr, err)
			require.Equal(t, string(want), string(got))
		})
	}
	responses := []struct{ name, body, plain string }{
		{"case variant of instructions", `{"Instructions":"be brief","input":"hi"}`, `{"input":"hi"}`},
		{"case variant of input", `{"input":"hi","INPUT":"other"}`, `{"input":"hi"}`},
		{"case variant of role", `{"input":[{"role":"user","Role":"system","content":"hi"}]}`, `{"input":[{"role":"user","content":"hi"}]}`},
		{"repeated tools: no element reused", `{"input":"hi","tools":[{"type":"function","name":"f","description":"d"}],"tools":[{"type":"function","name":"g"}]}`,
			`{"input":"hi","tools":[{"type":"function","name":"g"}]}`},
	}
	for _, c := range responses {
		t.Run("responses/"+c.name, func(t *testing.T) {
			want, werr := translateResponses([]byte(c.plain), "m")
			got, err := translateResponses([]byte(c.body), "m")
			require.Equal(t, werr, err)
			require.Equal(t, string(want), string(got))
		})
	}
}

// vLLM adds a Responses request's instructions as a system message only
// when they are a non-empty string (construct_input_messages tests them for
// truth): "instructions": "" renders as no instructions at all, not as an
// empty system message the chat template would write out.
func TestLegacyResponsesEmptyInstructionsAreNone(t *testing.T) {
	want, err := translateResponses([]byte(`{"input":"hi"}`), "m")
	require.NoError(t, err)
	got, err := translateResponses([]byte(`{"instructions":"","input":"hi"}`), "m")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

// vLLM's Anthropic Messages request carries chat_template_kwargs and its
// chat translation passes them on to the chat template (a Qwen3 client's
// {"enable_thinking": false} changes the generation prompt), so the legacy
// translation passes them on too; null is none.
func TestLegacyMessagesKeepChatTemplateKwargs(t *testing.T) {
	out, err := translateMessages([]byte(`{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false}}`), "m")
	require.NoError(t, err)
	var got struct {
		ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
	}
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, map[string]any{"enable_thinking": false}, got.ChatTemplateKwargs, "%s", out)

	want, err := translateMessages([]byte(`{"messages":[{"role":"user","content":"hi"}]}`), "m")
	require.NoError(t, err)
	out, err = translateMessages([]byte(`{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":null}`), "m")
	require.NoError(t, err)
	require.Equal(t, string(want), string(out))
}

// vLLM continues a Responses request's last input message, rather than
// opening a new assistant turn after it, when that message is partial
// (status "in_progress" or "incomplete"; should_continue_final_message):
// the chat template then runs with continue_final_message and without a
// generation prompt, and the legacy translation asks the chat render for
// the same.
func TestLegacyResponsesContinuePartialFinalMessage(t *testing.T) {
	type flags struct {
		AddGenerationPrompt  *bool `json:"add_generation_prompt"`
		ContinueFinalMessage *bool `json:"continue_final_message"`
	}
	translate := func(status string) flags {
		body := `{"input":[{"role":"user","content":"tell a story"},{"type":"message","role":"assistant","status":"` + status +
			`","content":[{"type":"output_text","text":"Once upon"}]}]}`
		out, err := translateResponses([]byte(body), "m")
		require.NoError(t, err)
		var f flags
		require.NoError(t, json.Unmarshal(out, &f))
		return f
	}
	for _, status := range []string{"in_progress", "incomplete"} {
		f := translate(status)
		require.NotNil(t, f.AddGenerationPrompt, status)
		require.False(t, *f.AddGenerationPrompt, status)
		require.NotNil(t, f.ContinueFinalMessage, status)
		require.True(t, *f.ContinueFinalMessage, status)
	}
	require.Equal(t, flags{}, translate("completed"), "a completed message gets a new turn: the chat defaults")
}
