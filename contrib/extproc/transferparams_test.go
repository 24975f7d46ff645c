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
