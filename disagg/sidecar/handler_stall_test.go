package sidecar

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A client that stops reading its response is cut after
// Config.ResponseWriteTimeout: the response is aborted, the decoder's
// request ended, the body's share of the budget released, and the request
// counted as client_stalled. Before, the sidecar had no write deadline:
// the stalled client held its body's share of MaxBodyBytesInFlight, and
// its decoder stream, for as long as it kept the connection, so a few
// such clients left every other client's body a 503.
func TestSidecarCutsAClientThatStopsReading(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // runs after every other cleanup
	decoderDone := make(chan struct{})
	chunk := []byte("data: " + strings.Repeat("x", 32<<10) + "\n\n")
	decoder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(decoderDone)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for r.Context().Err() == nil { // streams until the sidecar hangs up
			if _, err := w.Write(chunk); err != nil {
				return
			}
			_ = rc.Flush()
		}
	}))
	t.Cleanup(decoder.Close)
	h, reg, url := startSidecar(t, Config{DecoderURL: decoder.URL, ResponseWriteTimeout: 200 * time.Millisecond})

	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		require.NoError(t, tc.SetReadBuffer(4096)) // fill up soon
	}
	body := `{"model":"m","prompt":"hello","stream":true}`
	_, err = fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	require.NoError(t, err)
	// The client reads nothing from here on.
	require.Eventually(t, func() bool {
		return counter(t, reg, "kvroute_sidecar_refused_requests_total", "reason", refusedClientStalled) == 1
	}, 20*time.Second, 20*time.Millisecond, "the stalled client is cut and counted")
	select {
	case <-decoderDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the decoder's request outlived the cut response")
	}
	require.Eventually(t, func() bool { return h.budget.InUse() == 0 }, 20*time.Second, 10*time.Millisecond,
		"the body's share of the budget is released")
}
