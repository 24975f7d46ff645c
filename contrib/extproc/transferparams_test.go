package extproc

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A client's own kv_transfer_params never reach the engine through the
// picker: the body it sends back to Envoy lacks them (the rest unchanged,
// Content-Length its new length), each removal counted; a body without
// them goes back byte for byte; with AllowClientKVTransferParams they pass.
func TestPickerRemovesClientTransferParams(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, allow := range []bool{false, true} {
		h := newHarness(t, Config{AllowClientKVTransferParams: allow}, engineOpts{})
		with := `{"model":"` + testModel + `","prompt":"` + prompt(3, 20, "x") + `","max_tokens":1,"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"203.0.113.9"}}`
		without := `{"model":"` + testModel + `","prompt":"` + prompt(3, 20, "x") + `","max_tokens":1}`
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
		require.NoError(t, st.Send(bodyChunk(with, true)))
		hr, err := st.Recv()
		require.NoError(t, err)
		br, err := st.Recv()
		require.NoError(t, err)
		got := string(br.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody())
		length := setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), "content-length")
		if allow {
			require.Equal(t, with, got)
			require.Zero(t, h.counter("kvroute_extproc_client_transfer_params_removed_total", nil))
		} else {
			require.JSONEq(t, without, got)
			require.Equal(t, 1.0, h.counter("kvroute_extproc_client_transfer_params_removed_total", nil))
		}
		require.Equal(t, strconv.Itoa(len(got)), length)
		require.NoError(t, st.CloseSend())
		_, _ = drain(t, st)

		st, err = h.client.Process(ctxT(t))
		require.NoError(t, err)
		sendRequest(t, st, without, nil) // checks that the body comes back unchanged
		require.NoError(t, st.CloseSend())
		_, _ = drain(t, st)
		h.idle()
		require.Eventually(t, func() bool { return h.picker.bodies.InUse() == 0 }, wait, time.Millisecond)
		h.close()
	}
}

// vLLM's server percent-decodes a request's path before it matches its
// routes, so "/v1/%63ompletions" and "/v1%2Fchat%2Fcompletions" are its
// completions and chat routes. The picker reads the path the same way: such
// a request is routed as the API's (a client's kv_transfer_params removed,
// as from any inference body) and reaches the engine by the API's own
// path, instead of passing through round robin with its body untouched.
func TestProcessPercentEncodedInferencePathIsRoutedAsItsAPI(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	body := `{"model":"` + testModel + `","prompt":"` + prompt(4, 20, "enc") + `","max_tokens":1,"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"203.0.113.9"}}`
	for i, c := range []struct{ in, want string }{
		{"/v1/%63ompletions", "/v1/completions"},
		{"/v1%2Fcompletions/?x=1", "/v1/completions?x=1"},
		{"/v1/%zzcompletions", ""}, // no escape vLLM decodes: not an API's path, passed through
	} {
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(envoyHeaders(c.in, false, nil)))
		require.NoError(t, st.Send(bodyChunk(body, true)))
		hr, err := st.Recv()
		require.NoError(t, err)
		mut := hr.GetRequestHeaders().GetResponse().GetHeaderMutation()
		require.Equal(t, c.want, setHeader(mut, ":path"), c.in)
		br, err := st.Recv()
		require.NoError(t, err)
		sent := string(br.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody())
		if c.want != "" {
			require.NotContains(t, sent, "kv_transfer_params", c.in)
			require.Equal(t, float64(i+1), h.counter("kvroute_extproc_requests_total", map[string]string{"result": resultRouted}), c.in)
		} else {
			require.Equal(t, body, sent, c.in)
		}
		drain(t, st)
		h.idle()
	}
}
