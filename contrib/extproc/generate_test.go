package extproc

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// generateBody is a GenerateRequest of n token IDs from first.
func generateBody(first, n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(first + i)
	}
	return fmt.Sprintf(`{"model":%q,"token_ids":[%s],"sampling_params":{"max_tokens":2}}`, testModel, strings.Join(ids, ","))
}

// A request to vLLM's token-in /inference/v1/generate is routed by its own
// token IDs, as the kvroute gateway routes it: its prompt's tokens are
// committed on the pick, without render (the engines here cannot render),
// and a body without token IDs is answered 400 before any pick. It was
// spread round robin as a request without a prompt, so that a client that
// renders by itself lost the cache-aware routing it came for.
func TestProcessGenerateIsRoutedByItsTokenIDs(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{noRender: true})
	defer h.close()
	id := h.engines[0].id

	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/inference/v1/generate", false, nil)))
	require.NoError(t, st.Send(bodyChunk(generateBody(1000, 64), true)))
	hr, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, id, setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader),
		"routed (got %T)", hr.Response)
	_, err = st.Recv() // the body's answer
	require.NoError(t, err)
	tokens, reqs := h.load(id)
	require.EqualValues(t, 1, reqs)
	require.EqualValues(t, 64, tokens, "the prompt's token IDs are committed until the first chunk")
	_, _ = drain(t, st)
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": resultRouted}))
	require.Zero(t, h.counter("kvroute_extproc_render_fallbacks_total", nil), "nothing to render")

	st, err = h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/inference/v1/generate", false, nil)))
	require.NoError(t, st.Send(bodyChunk(fmt.Sprintf(`{"model":%q,"prompt":"text"}`, testModel), true)))
	resp, err := st.Recv()
	require.NoError(t, err)
	ir := resp.GetImmediateResponse()
	require.NotNil(t, ir, "a generate body without token IDs is answered (got %T)", resp.Response)
	require.EqualValues(t, http.StatusBadRequest, ir.GetStatus().GetCode())
	require.Contains(t, string(ir.GetBody()), "token_ids")
	_, _ = drain(t, st)
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": resultBadRequest}))
	h.idle()
}
