package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/simengine"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestMetricsCountWhatTheCacheDid(t *testing.T) {
	s, base := startServer(t, Config{})
	content := strings.Repeat("shared prefix words ", 10)
	body := chatBody(content, 2)
	prompt, err := simengine.ApplyChatTemplate(nil, []simengine.Message{{Role: "system", Content: "You are a simulated engine."}, {Role: "user", Content: content}}, "", true)
	require.NoError(t, err)
	n := len(prompt)
	for range 3 {
		code, out := post(t, base+"/v1/chat/completions", body)
		require.Equal(t, http.StatusOK, code, string(out))
	}
	code, text := get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	// 3 × n tokens queried; the 2nd and 3rd hit floor((n-1)/4)*4 tokens each.
	for _, line := range []string{
		fmt.Sprintf(`vllm:prefix_cache_queries_total{engine="0",model_name="m"} %d`, 3*n),
		fmt.Sprintf(`vllm:prefix_cache_hits_total{engine="0",model_name="m"} %d`, 2*((n-1)/4*4)),
		`vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 3`,
		`vllm:num_requests_running{engine="0",model_name="m"} 0`,
		`vllm:num_requests_waiting{engine="0",model_name="m"} 0`,
		`simengine_http_requests_total{code="200",route="/v1/chat/completions"} 3`,
	} {
		require.Contains(t, string(text), line)
	}
	require.Equal(t, 3.0, testutil.ToFloat64(s.reqs.WithLabelValues("/v1/chat/completions", "200")))
}

func TestModelsHealthResetAndUnknownRoutes(t *testing.T) {
	s, base := startServer(t, Config{LoRAModules: []string{"my-lora"}})
	code, body := get(t, base+"/health")
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, body)

	code, body = get(t, base+"/v1/models")
	require.Equal(t, http.StatusOK, code)
	models := decode[struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string  `json:"id"`
			Parent      *string `json:"parent"`
			MaxModelLen *int    `json:"max_model_len"`
		} `json:"data"`
	}](t, body)
	require.Equal(t, "list", models.Object)
	require.Len(t, models.Data, 2)
	require.Equal(t, "m", models.Data[0].ID)
	require.Equal(t, 2048, *models.Data[0].MaxModelLen)
	require.Equal(t, "my-lora", models.Data[1].ID)
	require.Equal(t, "m", *models.Data[1].Parent)
	// vLLM's card of an adapter has no max_model_len (null): only its base
	// models' cards carry the engine's.
	require.Nil(t, models.Data[1].MaxModelLen)

	// A LoRA request runs with the adapter's extra key.
	b := chatBody("hi", 1)
	b["model"] = "my-lora"
	code, body = post(t, base+"/v1/chat/completions", b)
	require.Equal(t, http.StatusOK, code, string(body))
	require.Contains(t, string(body), `"model":"my-lora"`)

	code, body = get(t, base+"/nope")
	require.Equal(t, http.StatusNotFound, code)
	require.JSONEq(t, `{"detail":"Not Found"}`, string(body))
	code, body = get(t, base+"/v1/chat/completions")
	require.Equal(t, http.StatusMethodNotAllowed, code)
	require.JSONEq(t, `{"detail":"Method Not Allowed"}`, string(body))

	// Reset fails while a request holds blocks, succeeds once it is done.
	long := chatBody("keep running", 1500)
	long["stream"] = true
	done := make(chan struct{})
	go func() {
		defer close(done)
		readSSE(t, base+"/v1/chat/completions", long)
	}()
	require.Eventually(t, func() bool { return s.Engine().Stats().Running == 1 }, 10*time.Second, time.Millisecond)
	code, body = post(t, base+"/reset_prefix_cache", nil)
	require.Equal(t, http.StatusConflict, code, string(body))
	<-done
	code, _ = post(t, base+"/reset_prefix_cache", nil)
	require.Equal(t, http.StatusOK, code)
	require.Zero(t, s.Engine().Stats().CachedBlocks)
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(Config{}, Options{})
	require.Error(t, err, "model required")
	_, err = New(Config{Model: "m", LoRAModules: []string{"m"}}, Options{})
	require.Error(t, err)
	_, err = New(Config{Model: "m", KVEvents: KVEventsConfig{Publisher: "kafka"}}, Options{})
	require.ErrorIs(t, err, ErrBadKVEventsConfig)
	_, err = New(Config{Model: "m", Engine: fastEngine(), DefaultMaxTokens: -1}, Options{})
	require.Error(t, err)
}
