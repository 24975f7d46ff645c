package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
