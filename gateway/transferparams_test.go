package gateway

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A client's own kv_transfer_params (its name escaped or not) never reach
// the engine: vLLM's KV connector would pull blocks from the remote_host
// the client names. The rest of the body arrives unchanged, and each
// removal is counted; with allowClientKVTransferParams the body passes as
// sent.
func TestGatewayRemovesClientTransferParams(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, allow := range []bool{false, true} {
		h := newHarness(t, 1, Config{AllowClientKVTransferParams: allow})
		h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices":[]}`)
		})
		bodies := []string{
			`{"model":"test-model","prompt":"hello there","max_tokens":1,"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"203.0.113.9","remote_port":5600}}`,
			`{"model":"test-model","prompt":"hello there","max_tokens":1,"kv_transfer_param\u0073":{"do_remote_prefill":true}}`,
			`{"model":"test-model","prompt":"hello there","max_tokens":1}`,
		}
		for _, b := range bodies {
			resp := h.post("/v1/completions", b)
			readAll(t, resp)
			require.Equal(t, http.StatusOK, resp.StatusCode)
		}
		got, _ := h.ups[0].received()
		require.Len(t, got, 3)
		if allow {
			for i, b := range bodies {
				require.Equal(t, b, string(got[i]), "passed as sent")
			}
			require.Zero(t, testutil.ToFloat64(h.handler.met.transferRemoved))
		} else {
			require.JSONEq(t, `{"model":"test-model","prompt":"hello there","max_tokens":1}`, string(got[0]))
			require.JSONEq(t, `{"model":"test-model","prompt":"hello there","max_tokens":1}`, string(got[1]))
			require.Equal(t, bodies[2], string(got[2]), "a body without them is not touched")
			require.Equal(t, 2.0, testutil.ToFloat64(h.handler.met.transferRemoved))
		}
		require.Eventually(t, func() bool { return h.handler.budget.InUse() == 0 }, wait, time.Millisecond)
		h.close()
	}
}
