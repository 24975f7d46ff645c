package sidecar

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TransferParams finds kv_transfer_params in a prefiller's answer by its
// exact name, the last one when repeated, as vLLM's proxies read it: a
// case variant is another member.
func TestTransferParamsReadsTheExactMember(t *testing.T) {
	for _, c := range []struct{ resp, want, err string }{
		{resp: `{"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"a"}}`, want: `{"do_remote_prefill":true,"remote_host":"a"}`},
		{resp: `{"KV_TRANSFER_PARAMS":{"do_remote_prefill":true}}`, err: "has no kv_transfer_params"},
		{resp: `{"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"a"},"Kv_Transfer_Params":{"do_remote_prefill":true,"remote_host":"b"}}`,
			want: `{"do_remote_prefill":true,"remote_host":"a"}`},
		{resp: `{"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"a"},"kv_transfer_params":{"do_remote_prefill":true,"remote_host":"b"}}`,
			want: `{"do_remote_prefill":true,"remote_host":"b"}`},
		{resp: `{"kv_transfer_params":{"do_remote_prefill":true,"DO_REMOTE_PREFILL":false}}`, want: `{"do_remote_prefill":true,"DO_REMOTE_PREFILL":false}`},
		{resp: `{"kv_transfer_params":{"Do_Remote_Prefill":true}}`, err: "lacks do_remote_prefill: true"},
		{resp: `null`, err: "not a JSON object"},
	} {
		got, err := TransferParams([]byte(c.resp))
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.resp)
			continue
		}
		require.NoError(t, err, c.resp)
		require.Equal(t, c.want, string(got), c.resp)
	}
}
