package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// aliasServer serves model "a" under the further name "b", with an adapter
// "l" and the render and token-in routes.
func aliasServer(t *testing.T) (*Server, string) {
	t.Helper()
	return startServer(t, Config{Model: "a", ServedModelAliases: []string{"b"}, LoRAModules: []string{"l"},
		EnableScaleOut: true, AllowRuntimeLoRAUpdating: true})
}

// /v1/models lists the base model under each served name, in order, with
// the same root (Config.ModelPath, else the first name) and max_model_len
// and no parent; the adapter follows, parented on the first name.
func TestServedModelAliasesListedWithTheModelsRoot(t *testing.T) {
	_, url := aliasServer(t)
	code, body := get(t, url+"/v1/models")
	require.Equal(t, http.StatusOK, code)
	list := decode[struct {
		Data []struct {
			ID          string  `json:"id"`
			Root        string  `json:"root"`
			Parent      *string `json:"parent"`
			MaxModelLen *int    `json:"max_model_len"`
		} `json:"data"`
	}](t, body).Data
	require.Len(t, list, 3)
	a, b, l := list[0], list[1], list[2]
	require.Equal(t, []string{"a", "b", "l"}, []string{a.ID, b.ID, l.ID})
	require.Equal(t, "a", a.Root)
	require.Equal(t, a.Root, b.Root, "one model path under both names")
	require.NotNil(t, a.MaxModelLen)
	require.Equal(t, a.MaxModelLen, b.MaxModelLen)
	require.Nil(t, a.Parent)
	require.Nil(t, b.Parent)
	require.Equal(t, "a", *l.Parent, "an adapter without a base name is parented on the first served name")
	require.Nil(t, l.MaxModelLen)

	// With the model's path given (vLLM's --model beside
	// --served-model-name), every name's root is that path.
	_, url = startServer(t, Config{Model: "a", ServedModelAliases: []string{"b"}, ModelPath: "/weights/a"})
	code, body = get(t, url+"/v1/models")
	require.Equal(t, http.StatusOK, code)
	roots := decode[struct {
		Data []struct {
			Root string `json:"root"`
		} `json:"data"`
	}](t, body).Data
	require.Len(t, roots, 2)
	require.Equal(t, "/weights/a", roots[0].Root)
	require.Equal(t, "/weights/a", roots[1].Root)
}

// A request naming the alias runs on the base model's engine and cache:
// the prompt a request for "a" cached is a hit for "b" and back, and every
// answer names the first served name, streamed chunks included.
func TestServedModelAliasSharesTheCacheAndAnswersAsTheFirstName(t *testing.T) {
	s, url := aliasServer(t)
	require.Same(t, s.Engine(), s.ModelEngine("b"))
	type answer struct {
		Model string `json:"model"`
		Usage struct {
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	complete := func(model string) answer {
		t.Helper()
		code, b := post(t, url+"/v1/completions", map[string]any{"model": model, "prompt": wordsText(300), "max_tokens": 1})
		require.Equal(t, http.StatusOK, code, string(b))
		return decode[answer](t, b)
	}
	first := complete("a")
	require.Zero(t, first.Usage.Details.Cached)
	viaAlias := complete("b")
	require.Equal(t, "a", viaAlias.Model, "the first served name, not the alias the request gave")
	require.Positive(t, viaAlias.Usage.Details.Cached, "the alias hits the blocks the first name's request cached")
	again := complete("a")
	require.Equal(t, viaAlias.Usage.Details.Cached, again.Usage.Details.Cached, "both names find the same blocks")

	chat := chatBody("hello", 2)
	chat["model"] = "b"
	code, b := post(t, url+"/v1/chat/completions", chat)
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, "a", decode[answer](t, b).Model)
	for path, body := range map[string]map[string]any{
		"/v1/responses": {"model": "b", "input": "hello", "max_output_tokens": 2},
		"/v1/messages":  {"model": "b", "max_tokens": 2, "messages": []map[string]any{{"role": "user", "content": "hello"}}},
		GeneratePath:    {"model": "b", "token_ids": []int{5, 6, 7}, "sampling_params": map[string]any{"max_tokens": 2}},
	} {
		code, b := post(t, url+path, body)
		require.Equal(t, http.StatusOK, code, string(b))
		require.Equal(t, "a", decode[answer](t, b).Model, path)
	}

	// Streams: every chunk names the first served name.
	streamed := func(path string, body map[string]any) {
		t.Helper()
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": true}
		evs := readSSE(t, url+path, body)
		require.Equal(t, "[DONE]", evs[len(evs)-1].data)
		for _, e := range evs[:len(evs)-1] {
			require.Equal(t, "a", decode[answer](t, []byte(e.data)).Model, "%s chunk %s", path, e.data)
		}
	}
	streamed("/v1/completions", map[string]any{"model": "b", "prompt": "hello", "max_tokens": 3})
	chat = chatBody("hello", 3)
	chat["model"] = "b"
	streamed("/v1/chat/completions", chat)

	// An adapter's answer names the adapter.
	code, b = post(t, url+"/v1/completions", map[string]any{"model": "l", "prompt": "hello", "max_tokens": 1})
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, "l", decode[answer](t, b).Model)

	// The render routes copy the request's name, as vLLM's renderer does.
	code, b = post(t, url+"/v1/completions/render", map[string]any{"model": "b", "prompt": "hello"})
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, "b", decode[[]answer](t, b)[0].Model)

	// The metrics are labelled with the first name only.
	code, b = get(t, url+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(b), `model_name="a"`)
	require.NotContains(t, string(b), `model_name="b"`)

	// An adapter may not take the alias's name at run time.
	code, b = post(t, url+"/v1/load_lora_adapter", map[string]any{"lora_name": "b", "lora_path": "/p"})
	require.Equal(t, http.StatusBadRequest, code, string(b))
	require.Contains(t, string(b), "named as a model this server serves")
}

func TestServedModelAliasesRefusedWhenAmbiguous(t *testing.T) {
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"empty":       {Config{Model: "a", ServedModelAliases: []string{""}}, "alias 0 is empty"},
		"the model":   {Config{Model: "a", ServedModelAliases: []string{"a"}}, `"a" is the model's own name`},
		"repeated":    {Config{Model: "a", ServedModelAliases: []string{"b", "c", "b"}}, `"b" is given twice`},
		"adapter":     {Config{Model: "a", ServedModelAliases: []string{"l"}, LoRAModules: []string{"l"}}, `"l" is also a LoRA module's name`},
		"extra model": {Config{Model: "a", ServedModelAliases: []string{"x"}, ExtraModels: []string{"x"}}, `"x" is also an extra model's name`},
	} {
		c.cfg.Engine = fastEngine()
		_, err := New(c.cfg, Options{})
		require.ErrorContains(t, err, c.want, name)
	}
}
