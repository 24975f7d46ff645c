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
