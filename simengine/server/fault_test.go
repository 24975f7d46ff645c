package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// While suppressed, the engine still caches and reports cached_tokens, but
// publishes nothing: no sequence is spent (no gap for a subscriber) and the
// replay buffer holds nothing of it.
func TestSuppressKVEventsDropsBatchesWithoutGap(t *testing.T) {
	kv, err := ParseKVEventsConfig(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:0","replay_endpoint":"tcp://127.0.0.1:0"}`)
	require.NoError(t, err)
	s, base := startServer(t, Config{KVEvents: kv, Engine: fastEngine()})
	prompt := []int{1, 2, 3, 4, 5, 6, 7, 8, 9}

	code, out := post(t, base+SuppressKVEventsPath+"?on=true", nil)
	require.Equal(t, http.StatusOK, code, string(out))
	code, _ = post(t, base+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1})
	require.Equal(t, http.StatusOK, code)
	require.Eventually(t, func() bool { return s.Publisher().Suppressed() == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Zero(t, s.Publisher().Stats().Published)
	require.Empty(t, replayAll(t, s.ReplayEndpoint()))

	// The engine cached the prompt all the same: the repeat reuses 2 blocks of 4.
	code, out = post(t, base+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1})
	require.Equal(t, http.StatusOK, code)
	u := decode[struct {
		Usage usage `json:"usage"`
	}](t, out).Usage
	require.Equal(t, 8, u.PromptTokensDetails.CachedTokens)

	code, _ = post(t, base+SuppressKVEventsPath+"?on=false", nil)
	require.Equal(t, http.StatusOK, code)
	code, _ = post(t, base+"/v1/completions", map[string]any{"prompt": []int{21, 22, 23, 24, 25}, "max_tokens": 1})
	require.Equal(t, http.StatusOK, code)
	require.Eventually(t, func() bool { return s.Publisher().Stats().Published == 1 }, 10*time.Second, 5*time.Millisecond)

	code, _ = post(t, base+SuppressKVEventsPath+"?on=maybe", nil)
	require.Equal(t, http.StatusBadRequest, code)
}
