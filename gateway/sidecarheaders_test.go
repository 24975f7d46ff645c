package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A client's own values of the headers the decode pod's routing sidecar
// acts on are removed (TestGatewayRemovesClientSidecarRoutingHeaders), and
// each request that carried any is counted, as a client's own
// kv_transfer_params are: a client steering the sidecar past the pick was
// otherwise dropped without a trace. A request with none is not counted,
// nor one with several more than once.
func TestGatewayCountsRemovedClientSidecarRoutingHeaders(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	removed := func() float64 { return metricValue(t, h.reg, "kvroute_gateway_client_sidecar_headers_removed_total") }
	send := func(method, path, body string, hdr ...string) {
		t.Helper()
		req, err := http.NewRequest(method, h.gw.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		for _, k := range hdr {
			req.Header.Set(k, "203.0.113.9:1")
		}
		resp, err := h.client.Do(req)
		require.NoError(t, err)
		readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	send(http.MethodPost, "/v1/completions", completionsBody("hello there", false))
	require.Zero(t, removed())
	send(http.MethodPost, "/v1/completions", completionsBody("hello there", false), "x-prefiller-host-port", "x-llm-d-prefiller-host-port")
	require.Equal(t, 1.0, removed())
	send(http.MethodPost, "/v1/messages/count_tokens", `{"model":"test-model","messages":[]}`, "x-kv-cache-source-host-port")
	send(http.MethodGet, "/v1/models", "", "x-data-parallel-host-port")
	send(http.MethodPost, "/v1/completions", completionsBody("hello there", false), "x-llm-d-encoder-hosts-ports")
	require.Equal(t, 4.0, removed(), "on every route passed through")
}
