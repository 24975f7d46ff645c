package gateway

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// GET /v1/models is counted under api "models" by its result, as the
// inference routes and the token count are: an engine that fails the
// listing (clients such as OpenAI's SDK-based UIs ask it first) answered
// the client 502 or 503 with nothing in the gateway's metrics.
func TestGatewayCountsTheModelListing(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	h.ups[0].setInfer(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"test-model"}]}`)
	})
	list := func() int {
		t.Helper()
		resp, err := h.client.Get(h.gw.URL + "/v1/models")
		require.NoError(t, err)
		readAll(t, resp)
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, list())
	awaitCounted(t, h.reg, "models", ResultSuccess, 1)
	requireFailuresCounted(t, h, "models", list)
}
