package sidecar

import (
	"encoding/json"
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

// The prefill body caps min_tokens with max_tokens: vLLM refuses a request
// whose min_tokens exceeds its max_tokens (400), so a client's min_tokens
// above 1 made every prefill step fail and every such request fall back to
// a local prefill, counted as a prefiller error.
func TestPrefillBodyCapsMinTokens(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"model":"m","prompt":"p","max_tokens":50,"min_tokens":20}`, `1`},
		{`{"model":"m","prompt":"p","min_tokens":1}`, `1`},
		{`{"model":"m","prompt":"p","min_tokens":0}`, `1`},
		{`{"model":"m","prompt":"p"}`, ``},
	} {
		pb, err := PrefillBody([]byte(c.body))
		require.NoError(t, err, c.body)
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(pb, &m))
		require.Equal(t, c.want, string(m["min_tokens"]), c.body)
		require.Equal(t, `1`, string(m["max_tokens"]), c.body)
	}
	// The decoder gets the client's own.
	db, err := DecodeBody([]byte(`{"model":"m","prompt":"p","max_tokens":50,"min_tokens":20}`), json.RawMessage(`{"do_remote_prefill":true}`))
	require.NoError(t, err)
	require.Contains(t, string(db), `"min_tokens":20`)
}
