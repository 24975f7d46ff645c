package sidecar

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine/server"
)

// Every request the sidecar answers with an error of its own is counted
// under its reason in kvroute_sidecar_refused_requests_total, and not as a
// plain request: a body that is not a JSON object, one over MaxBodyBytes
// (prefiller named or not), and one the decoder cannot be reached for.
func TestSidecarCountsRefusedRequests(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	pre := startEngine(t, server.RolePrefill)
	_, reg, url := startSidecar(t, Config{DecoderURL: "http://" + freeAddr(t), MaxBodyBytes: 4096})
	refused := func(reason string) float64 {
		return counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", reason)
	}
	for _, r := range refusedReasons {
		require.Zero(t, refused(r), r)
	}

	code, _, b := send(t, url+"/v1/chat/completions", pre.Addr(), []byte(`not json`))
	require.Equal(t, http.StatusBadRequest, code, string(b))
	require.Equal(t, 1.0, refused(refusedBadBody))

	big := chat(strings.Repeat("x ", 4096), 1, false)
	code, _, b = send(t, url+"/v1/chat/completions", pre.Addr(), big)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, string(b))
	code, _, b = send(t, url+"/v1/chat/completions", "", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, string(b))
	require.Equal(t, 2.0, refused(refusedTooLarge))
	require.Zero(t, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomePlain), "a refused request is not proxied")

	code, _, b = send(t, url+"/v1/chat/completions", "", chat("hello", 1, false))
	require.Equal(t, http.StatusBadGateway, code, string(b))
	require.Equal(t, 1.0, refused(refusedDecoderUnreachable))
	require.Equal(t, 1.0, counter(t, reg, "kvroute_sidecar_requests_total", "outcome", OutcomePlain))
	require.Zero(t, refused(refusedClientGone))
}

// The sidecar answers its own errors in the shape of the API it was asked,
// as the engine behind it would: Anthropic's {"type":"error","error":{type,
// message}} on /v1/messages, vLLM's OpenAI {"error":{message,type,param,
// code}} (param null) elsewhere.
func TestSidecarAnswersErrorsInTheAPIsShape(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	_, _, url := startSidecar(t, Config{DecoderURL: "http://" + freeAddr(t), MaxBodyBytes: 64})
	big := []byte(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"` + strings.Repeat("x", 100) + `"}]}`)

	code, _, b := send(t, url+"/v1/messages", "", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, string(b))
	require.JSONEq(t, `{"type":"error","error":{"type":"request_too_large","message":"request body larger than 64 bytes"}}`, string(b))
	code, _, b = send(t, url+"/v1/messages", "", []byte(`{"model":"m"}`))
	require.Equal(t, http.StatusBadGateway, code, string(b))
	require.JSONEq(t, `{"type":"error","error":{"type":"api_error","message":"the decoder could not be reached"}}`, string(b))

	code, _, b = send(t, url+"/v1/chat/completions", "", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, string(b))
	require.JSONEq(t, `{"error":{"message":"request body larger than 64 bytes","type":"BadRequestError","param":null,"code":413}}`, string(b))
}
