package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/modelcard"
	"github.com/kvroute/kvroute/simengine"
)

// Over HTTP: a completion for an adapter loads it into a slot, the
// server's /metrics carries vllm:lora_requests_info with the adapter as
// vLLM writes it, and an adapter the server does not serve is vLLM's 404.
func TestLoRAOverHTTP(t *testing.T) {
	eng := fastEngine()
	eng.LoRA = &simengine.LoRAConfig{MaxLoRAs: 1, LoadTime: 5 * time.Millisecond}
	s, base := startServer(t, Config{LoRAModules: []string{"sql", "chat"}, Engine: eng})

	for _, model := range []string{"sql", "chat", "sql"} {
		code, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": "hello there", "max_tokens": 2})
		require.Equal(t, http.StatusOK, code, string(body))
	}
	st := s.Engine().Stats()
	require.Equal(t, uint64(3), st.LoRALoads, "one slot: sql, then chat evicts it, then sql again")
	require.Equal(t, uint64(2), st.LoRAEvictions)
	require.Equal(t, []string{"sql"}, s.Engine().LoadedLoRAs())

	code, body := get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	page := string(body)
	require.Contains(t, page, "# TYPE vllm:lora_requests_info gauge")
	require.Contains(t, page, `vllm:lora_requests_info{max_lora="1",running_lora_adapters="sql",waiting_lora_adapters=""}`)
	require.Contains(t, page, `vllm:lora_requests_info{max_lora="1",running_lora_adapters="chat",waiting_lora_adapters=""}`)
	require.Contains(t, page, "simengine_lora_loads_total 3")

	code, body = post(t, base+"/v1/completions", map[string]any{"model": "nope", "prompt": "hi", "max_tokens": 1})
	require.Equal(t, http.StatusNotFound, code)
	require.True(t, strings.Contains(string(body), "The model `nope` does not exist."), string(body))
}

// An adapter named twice in LoRAModules is refused at start, as vLLM
// refuses a --lora-modules entry whose name is already loaded: served, it
// was listed twice in /v1/models and its requests ran under the second
// entry's lora_id.
func TestRepeatedLoRAModuleIsRefused(t *testing.T) {
	_, err := New(Config{Model: "m", LoRAModules: []string{"sql", "chat", "sql"}, Engine: fastEngine()}, Options{})
	require.ErrorContains(t, err, `"sql"`)
}

// modelCards reads /v1/models as id → parent ("" for none) and root, and
// checks that every card carries vLLM's one permission.
func modelCards(t *testing.T, base string) (ids []string, parent, root map[string]string) {
	t.Helper()
	code, body := get(t, base+"/v1/models")
	require.Equal(t, http.StatusOK, code, string(body))
	l := decode[struct {
		Data []struct {
			ID         string                 `json:"id"`
			Root       string                 `json:"root"`
			Parent     *string                `json:"parent"`
			Permission []modelcard.Permission `json:"permission"`
		} `json:"data"`
	}](t, body)
	parent, root = map[string]string{}, map[string]string{}
	for _, d := range l.Data {
		require.Len(t, d.Permission, 1, d.ID)
		p := d.Permission[0]
		require.Equal(t, modelcard.Permission{ID: p.ID, Object: "model_permission", Created: p.Created,
			AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*"}, p, d.ID)
		ids = append(ids, d.ID)
		root[d.ID] = d.Root
		if d.Parent != nil {
			parent[d.ID] = *d.Parent
		}
	}
	return ids, parent, root
}

// With AllowRuntimeLoRAUpdating the server serves vLLM's
// /v1/load_lora_adapter and /v1/unload_lora_adapter with vLLM's answers: a
// loaded adapter is listed on /v1/models (its path as root, the base model
// as parent) and served under the next lora_id; an unloaded one is
// forgotten (404 to its requests) and its slot freed. Without the option
// both are unknown paths, as in vLLM without
// VLLM_ALLOW_RUNTIME_LORA_UPDATING.
func TestRuntimeLoRAUpdating(t *testing.T) {
	_, off := startServer(t, Config{LoRAModules: []string{"sql"}})
	code, body := post(t, off+"/v1/load_lora_adapter", map[string]any{"lora_name": "chat", "lora_path": "/a/chat"})
	require.Equal(t, http.StatusNotFound, code)
	require.JSONEq(t, `{"detail":"Not Found"}`, string(body))

	rec := newRecorder()
	eng := fastEngine()
	eng.LoRA, eng.Sink = &simengine.LoRAConfig{MaxLoRAs: 2, LoadTime: time.Millisecond}, rec
	s, base := startServer(t, Config{LoRAModules: []string{"sql"}, AllowRuntimeLoRAUpdating: true, Engine: eng})
	ids, parent, root := modelCards(t, base)
	require.Equal(t, []string{"m", "sql"}, ids)
	require.Equal(t, map[string]string{"sql": "m"}, parent, "the base model has a null parent")
	require.Equal(t, "sql", root["sql"])

	code, body = post(t, base+"/v1/completions", map[string]any{"model": "chat", "prompt": "hello", "max_tokens": 1})
	require.Equal(t, http.StatusNotFound, code, "not loaded yet: %s", body)
	code, body = post(t, base+"/v1/load_lora_adapter", map[string]any{"lora_name": "chat", "lora_path": "/adapters/chat"})
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, "Success: LoRA adapter 'chat' added successfully.", string(body))
	ids, parent, root = modelCards(t, base)
	require.Equal(t, []string{"m", "sql", "chat"}, ids)
	require.Equal(t, "m", parent["chat"])
	require.Equal(t, "/adapters/chat", root["chat"])
	code, body = post(t, base+"/v1/completions", map[string]any{"model": "chat", "prompt": strings.Repeat("hello there friend ", 8), "max_tokens": 1})
	require.Equal(t, http.StatusOK, code, string(body))
	require.Contains(t, s.Engine().LoadedLoRAs(), "chat")
	stored := false
	require.Eventually(t, func() bool {
		for len(rec.ch) > 0 {
			for _, ev := range (<-rec.ch).Events {
				if ev.Type == simengine.BlockStored && ev.LoRAName == "chat" {
					require.Equal(t, 2, ev.LoRAID, "the next lora_id after sql's 1")
					stored = true
				}
			}
		}
		return stored
	}, 10*time.Second, time.Millisecond, "the loaded adapter's blocks are stored under its name")

	// vLLM's refusals.
	for _, c := range []struct {
		body   map[string]any
		status int
		typ    string
		msg    string
	}{
		{map[string]any{"lora_name": "chat", "lora_path": "/x"}, http.StatusBadRequest, "InvalidUserInput",
			"The lora adapter 'chat' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True."},
		{map[string]any{"lora_name": "", "lora_path": "/x"}, http.StatusBadRequest, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided."},
		{map[string]any{"lora_name": "x"}, http.StatusBadRequest, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided."},
		{map[string]any{"lora_name": "m", "lora_path": "/x"}, http.StatusBadRequest, "InvalidUserInput", "The lora adapter 'm' is named as a model this server serves."},
	} {
		code, body = post(t, base+"/v1/load_lora_adapter", c.body)
		require.Equal(t, c.status, code, string(body))
		e := decode[errorBody](t, body)
		require.Equal(t, c.typ, e.Error.Type)
		require.Equal(t, c.msg, e.Error.Message)
	}
	// In place: re-registered under the same lora_id, with its new path.
	code, body = post(t, base+"/v1/load_lora_adapter", map[string]any{"lora_name": "chat", "lora_path": "/adapters/chat-v2", "load_inplace": true})
	require.Equal(t, http.StatusOK, code, string(body))
	ids, _, root = modelCards(t, base)
	require.Equal(t, []string{"m", "sql", "chat"}, ids)
	require.Equal(t, "/adapters/chat-v2", root["chat"])

	code, body = post(t, base+"/v1/unload_lora_adapter", map[string]any{"lora_name": "nope"})
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "The lora adapter 'nope' cannot be found.", decode[errorBody](t, body).Error.Message)
	code, body = post(t, base+"/v1/unload_lora_adapter", map[string]any{})
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "'lora_name' needs to be provided to unload a LoRA adapter.", decode[errorBody](t, body).Error.Message)
	code, body = post(t, base+"/v1/unload_lora_adapter", map[string]any{"lora_name": "chat"})
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, "Success: LoRA adapter 'chat' removed successfully.", string(body))
	ids, _, _ = modelCards(t, base)
	require.Equal(t, []string{"m", "sql"}, ids)
	require.NotContains(t, s.Engine().LoadedLoRAs(), "chat", "its slot is freed")
	code, _ = post(t, base+"/v1/completions", map[string]any{"model": "chat", "prompt": "hello", "max_tokens": 1})
	require.Equal(t, http.StatusNotFound, code)

	// Loaded again: a new lora_id, as vLLM's counter gives.
	code, body = post(t, base+"/v1/load_lora_adapter", map[string]any{"lora_name": "chat", "lora_path": "/adapters/chat"})
	require.Equal(t, http.StatusOK, code, string(body))
	id, ok := s.loras.id("chat")
	require.True(t, ok)
	require.Equal(t, 3, id)
}
