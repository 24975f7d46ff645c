package kvroute

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/render"
)

// embedsBodies are completions bodies hasPromptEmbeds reads on the request
// path: prose, code (newlines, quotes and colons), prose whose non-ASCII
// letters are escaped (as Python's json.dumps writes them), a token-ID
// prompt, and one carrying prompt_embeds.
func embedsBodies() map[string][]byte {
	const code = `import json\n\ndef load(path):\n    \"\"\"Read the config at path and return its entries.\"\"\"\n` +
		`    with open(path) as f:\n        data = json.load(f)\n    out = []\n    for key, value in data.items():\n` +
		`        if value is None:\n            continue\n        out.append((key, str(value)))\n    return out\n\n`
	body := func(prompt string) []byte {
		return []byte(`{"model":"m","prompt":` + prompt + `,"max_tokens":16,"temperature":0.7}`)
	}
	return map[string][]byte{
		"prose":   body(`"` + strings.Repeat("Summarise the attached contract in three bullet points. ", 128) + `"`),
		"code":    body(`"` + strings.Repeat(code, 24) + `"`),
		"escaped": body(`"` + strings.Repeat(`Caf\u00e9 cr\u00e8me, \u4e2d\u6587. `, 256) + `"`),
		"tokens":  body(`[` + strings.Repeat(`1000,2003,15,30000,`, 256) + `7]`),
		"embeds":  []byte(`{"model":"m","prompt_embeds":"` + strings.Repeat("UEsDBAAACAgAAAAAAAAAAAAA", 256) + `","max_tokens":16}`),
	}
}

// BenchmarkHasPromptEmbeds measures the prompt_embeds check every
// completions body passes before render.
func BenchmarkHasPromptEmbeds(b *testing.B) {
	bodies := embedsBodies()
	for _, name := range []string{"prose", "code", "escaped", "tokens", "embeds"} {
		body := bodies[name]
		want := name == "embeds"
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if hasPromptEmbeds(render.APICompletions, body) != want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}

// hasPromptEmbeds matches the member by its name once its escapes are
// decoded, as vLLM's CompletionRequest does after json.loads: any letter
// may be written as a \u escape, in either case of hex digit. A name that
// only decodes to something else, or an escape in a value, is no match.
func TestHasPromptEmbedsEscapedName(t *testing.T) {
	for _, body := range []string{
		`{"prompt\u005fembeds":"UEsDBA=="}`,
		`{"\u0070rompt_embed\u0073":["UEsDBA=="]}`,
		`{"prompt_\u0065\u006D\u0062\u0065\u0064\u0073":"UEsDBA=="}`,
		`{"prompt":"caf\u00e9","\u0070\u0072\u006f\u006d\u0070\u0074\u005f\u0065\u006d\u0062\u0065\u0064\u0073":"UEsDBA=="}`,
	} {
		require.True(t, hasPromptEmbeds(render.APICompletions, []byte(body)), body)
		require.False(t, hasPromptEmbeds(render.APIChatCompletions, []byte(body)), body)
	}
	for _, body := range []string{
		`{"prompt":"caf\u00e9 \u4e2d"}`,
		`{"prompt":"prompt\u005fembeds"}`,
		`{"prompt\u005fembeds":null}`,
		`{"prompt\u005fembeds":[]}`,
		`{"prompt\u005fEmbeds":"UEsDBA=="}`,
		`{"prompt\u005fembeds":"UEsDBA==","prompt_embeds":null}`,
		`{"x":{"prompt\u005fembeds":"UEsDBA=="}}`,
	} {
		require.False(t, hasPromptEmbeds(render.APICompletions, []byte(body)), body)
	}
}

// FuzzMayNamePromptEmbeds: the quick look never turns away a body whose
// exact scan finds prompt_embeds, however its names and strings are
// written.
func FuzzMayNamePromptEmbeds(f *testing.F) {
	for _, b := range embedsBodies() {
		f.Add(b)
	}
	for _, s := range []string{
		`{"prompt\u005fembeds":"x"}`, `{"\u0070rompt_embeds" : ["x"]}`, `{"a":"\":\"","prompt_embeds"` + "\n\t:" + `"x"}`,
		`{"a":"\\","prompt_\u0065mbeds":"x"}`, `{"a":"b\\\"prompt_embeds\":1","prompt_embeds":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if carriesPromptEmbeds(body) && !mayNamePromptEmbeds(body) {
			t.Fatalf("the quick look turned away %q, which carries prompt_embeds", body)
		}
	})
}
