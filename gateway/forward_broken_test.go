package gateway

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/upstreamfail"
)

// TestGatewayCountsHowTheEngineBrokeOff: a response that breaks off
// mid-body is counted as upstream_broken, and by its kind in
// kvroute_gateway_upstream_broken_total: an engine that dies mid-body
// closed the connection, one that sends a malformed chunked body is other.
func TestGatewayCountsHowTheEngineBrokeOff(t *testing.T) {
	defer leakcheck.Check(t)()
	for name, tc := range map[string]struct {
		engine func(w http.ResponseWriter, r *http.Request)
		kind   upstreamfail.Kind
	}{
		"engine dies": {func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "0123456789")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, upstreamfail.Closed},
		"malformed chunk": {func(w http.ResponseWriter, r *http.Request) {
			conn, bw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(http.ErrAbortHandler) // counted as closed: the test fails
			}
			defer conn.Close()
			bw.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\nzz\r\n")
			bw.Flush()
		}, upstreamfail.Other},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 1, Config{})
			defer h.close()
			h.ups[0].setInfer(tc.engine)
			resp := h.post("/v1/completions", completionsBody("hi", false))
			_, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Error(t, err, "a truncated body must not look complete")
			require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultUpstreamBroken) == 1 }, wait, time.Millisecond)
			for k, c := range h.handler.met.broken {
				want := 0.0
				if upstreamfail.Kind(k) == tc.kind {
					want = 1
				}
				require.Equal(t, want, testutil.ToFloat64(c), upstreamfail.Kind(k).String())
			}
		})
	}
}
