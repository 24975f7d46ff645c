package server

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// A streamed do_remote_decode request on a prefiller answers no
// kv_transfer_params (vLLM puts them in a non-streamed answer only), but
// its blocks are held for a decoder as any prefill's are: under a lease,
// so they are freed when it expires, as vLLM's connector frees them after
// its abort timeout. Before, nothing ever released them: each such
// request kept its blocks in use for good, a prefix-cache reset failed
// from then on, and a prefiller whose blocks all went so stalled.
func TestPDStreamedPrefillBlocksLeased(t *testing.T) {
	pre, preURL := startServer(t, Config{PD: PDConfig{Role: RolePrefill, LeaseTTL: time.Minute}})
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	pre.pd.leases.mu.Lock()
	pre.pd.leases.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	pre.pd.leases.mu.Unlock()

	kv := map[string]any{"do_remote_decode": true, "do_remote_prefill": false}
	msgs := []map[string]any{{"role": "user", "content": longText}}
	bodies := map[string]map[string]any{
		"/v1/chat/completions": {"model": "m", "messages": msgs, "max_tokens": 1, "stream": true, "kv_transfer_params": kv},
		"/v1/completions":      {"model": "m", "prompt": longText, "max_tokens": 1, "stream": true, "kv_transfer_params": kv},
		"/v1/responses":        {"model": "m", "input": longText, "max_output_tokens": 1, "stream": true, "kv_transfer_params": kv},
		"/v1/messages":         {"model": "m", "messages": msgs, "max_tokens": 1, "stream": true, "kv_transfer_params": kv},
	}
	held := 0
	for path, body := range bodies {
		code, b := post(t, preURL+path, body)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, b)
		held++
		st := pre.Engine().Stats()
		require.Equal(t, held, st.HeldRequests, path)
		require.Equal(t, float64(held), testutil.ToFloat64(pre.pd.leases.held), "%s: every held request is under a lease", path)
	}

	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	pre.pd.leases.sweep()
	require.Equal(t, 4.0, testutil.ToFloat64(pre.pd.leases.dropped.WithLabelValues("expired")))
	st := pre.Engine().Stats()
	require.Equal(t, 0, st.HeldRequests, "expired leases free their blocks")
	require.Equal(t, st.NumBlocks, st.FreeBlocks)
	code, b := post(t, preURL+"/reset_prefix_cache", map[string]any{})
	require.Equal(t, http.StatusOK, code, string(b))
}
