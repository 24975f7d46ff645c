package sidecar

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// clientParams is a client's own kv_transfer_params asking the decoder to
// pull KV blocks from an address of the client's choosing.
var clientParams = map[string]any{"do_remote_prefill": true, "remote_engine_id": "x", "remote_block_ids": []int{1},
	"remote_host": "169.254.169.254", "remote_port": 5600}

// A request the sidecar does not split (no prefiller named) reaches the
// decoder without the client's own kv_transfer_params, every other field
// kept, and is counted; the copy holds nothing of the budget once
// answered. A request without them goes as it came and is not counted.
func TestSidecarRemovesClientTransferParamsFromAPlainRequest(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	dec := startBodyRecorder(t, "", `{"choices":[{"text":"ok"}]}`)
	h, reg, url := startSidecar(t, Config{DecoderURL: "http://" + dec.addr})
	removed := func() float64 { return total(t, reg, "kvroute_sidecar_client_transfer_params_removed_total") }
	require.Zero(t, removed())

	body := chat("hello", 4, false)
	body["kv_transfer_params"] = clientParams
	for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
		code, _, b := send(t, url+path, "", body)
		require.Equal(t, http.StatusOK, code, string(b))
		got := dec.body()
		require.NotContains(t, got, "kv_transfer_params", path)
		require.JSONEq(t, `4`, string(got["max_tokens"]), path)
		require.JSONEq(t, `"m"`, string(got["model"]), path)
	}
	require.Equal(t, 2.0, removed())
	require.Equal(t, 2.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomePlain))

	code, _, b := send(t, url+"/v1/chat/completions", "", chat("hello", 4, false))
	require.Equal(t, http.StatusOK, code, string(b))
	require.Contains(t, dec.body(), "messages")
	require.Equal(t, 2.0, removed(), "a body without them is not counted")
	released := func() bool { return h.budget.InUse() == 0 }
	require.Eventually(t, released, 20*time.Second, time.Millisecond, "the copies are given back")
}

// With AllowClientKVTransferParams the decoder gets a request the sidecar
// does not split with the client's kv_transfer_params as they came, and
// nothing is counted.
func TestSidecarAllowsClientTransferParamsWhenConfigured(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dec := startBodyRecorder(t, "", `{"choices":[{"text":"ok"}]}`)
	_, reg, url := startSidecar(t, Config{DecoderURL: "http://" + dec.addr, AllowClientKVTransferParams: true})
	body := chat("hello", 4, false)
	body["kv_transfer_params"] = clientParams
	code, _, b := send(t, url+"/v1/chat/completions", "", body)
	require.Equal(t, http.StatusOK, code, string(b))
	want, err := json.Marshal(clientParams)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(dec.body()["kv_transfer_params"]))
	require.Zero(t, total(t, reg, "kvroute_sidecar_client_transfer_params_removed_total"))
}

// The removal reads the body as vLLM does: a UTF-16 body's member is
// found and removed (the decoder gets the UTF-8 JSON it encodes). A body
// that is not one JSON object is answered 400 bad_body on a route vLLM
// reads kv_transfer_params from, and goes as it came elsewhere. A split
// request whose body carried them (here a fallback) is counted too.
func TestSidecarRemovesClientTransferParamsEverywhere(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dec := startBodyRecorder(t, "", `{"choices":[{"text":"ok"}]}`)
	_, reg, url := startSidecar(t, Config{DecoderURL: "http://" + dec.addr})
	removed := func() float64 { return total(t, reg, "kvroute_sidecar_client_transfer_params_removed_total") }

	code, _, b := send(t, url+"/v1/completions", "", wideBody(`{"model":"m","prompt":"hi","kv_transfer_params":{"do_remote_prefill":true}}`, 2, false, false))
	require.Equal(t, http.StatusOK, code, string(b))
	require.NotContains(t, dec.body(), "kv_transfer_params")
	require.JSONEq(t, `"hi"`, string(dec.body()["prompt"]))
	require.Equal(t, 1.0, removed())

	nan := []byte(`{"model":"m","prompt":"hi","temperature":NaN,"kv_transfer_params":{"do_remote_prefill":true}}`)
	for _, path := range []string{"/v1/completions", generatePath} {
		code, _, b = send(t, url+path, "", nan)
		require.Equal(t, http.StatusBadRequest, code, path+": "+string(b))
	}
	require.Equal(t, 2.0, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedBadBody))
	code, _, b = send(t, url+"/v1/audio/transcriptions", "", []byte(`not json`))
	require.Equal(t, "bad\n", string(b), "the decoder's own answer: the body went as it came")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, 2.0, counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedBadBody))

	body := chat("hello", 4, false)
	body["kv_transfer_params"] = clientParams
	code, _, b = send(t, url+"/v1/chat/completions", "bad target", body)
	require.Equal(t, http.StatusOK, code, string(b))
	require.NotContains(t, dec.body(), "kv_transfer_params")
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_prefill_fallbacks_total", "reason", ReasonBadTarget))
	require.Equal(t, 2.0, removed())
}

// total is the value of the counter without labels name in reg (0 when
// absent).
func total(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// With AllowClientKVTransferParams a split whose prefill step fails (here
// a prefiller answering 500) falls back to a local prefill with the
// client's kv_transfer_params on the decoder's request, the body the
// decoder gets for the same request naming no prefiller, and nothing is
// counted as removed.
func TestSidecarAllowsClientTransferParamsOnAFallback(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dec := startBodyRecorder(t, "", `{"choices":[{"text":"ok"}]}`)
	pre := fakePrefiller(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "prefill failed", http.StatusInternalServerError)
	})
	h, reg, url := startSidecar(t, Config{DecoderURL: "http://" + dec.addr, AllowClientKVTransferParams: true})
	body := chat("hello", 4, false)
	body["kv_transfer_params"] = clientParams

	code, _, b := send(t, url+"/v1/chat/completions", "", body)
	require.Equal(t, http.StatusOK, code, string(b))
	plain := dec.body()
	code, _, b = send(t, url+"/v1/chat/completions", pre, body)
	require.Equal(t, http.StatusOK, code, string(b))
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_prefill_fallbacks_total", "reason", ReasonStatus))
	fallback := dec.body()
	want, err := json.Marshal(clientParams)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(fallback["kv_transfer_params"]))
	require.Equal(t, plain, fallback, "the decoder gets what it gets with no prefiller named")
	require.Zero(t, total(t, reg, "kvroute_sidecar_client_transfer_params_removed_total"))
	released := func() bool { return h.budget.InUse() == 0 }
	require.Eventually(t, released, 20*time.Second, time.Millisecond, "the copies are given back")
}
