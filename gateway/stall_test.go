package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// endlessStream is an engine handler that streams events until the gateway
// cancels its request; cancelled is closed when it has seen that.
func endlessStream() (fn http.HandlerFunc, cancelled <-chan struct{}) {
	done := make(chan struct{})
	var once sync.Once
	event := []byte("data: " + strings.Repeat("x", 16<<10) + "\n\n")
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for r.Context().Err() == nil {
			if _, err := w.Write(event); err != nil {
				break
			}
			if rc.Flush() != nil {
				break
			}
		}
		once.Do(func() { close(done) })
	}, done
}

// A client that sends its body and then never reads its streamed response
// kept the whole request open for as long as it kept its connection: its
// body's share of the in-flight budget, which here holds one body, so every
// other client was refused with 503, and the engine request. Each response
// write now waits at most ResponseWriteTimeout: the stalled client is cut
// off, counted as client_stalled, its engine request cancelled and the
// budget freed for the others.
func TestGatewayCutsAClientThatStopsReadingItsResponse(t *testing.T) {
	defer leakcheck.Check(t)()
	const size = 256 << 10
	h := newHarness(t, 1, Config{MaxBodyBytes: size, MaxBodyBytesInFlight: size, ResponseWriteTimeout: 300 * time.Millisecond})
	defer h.close()
	stream, cancelled := endlessStream()
	h.ups[0].setInfer(stream)

	c := dialGateway(t, h.gw.URL)
	defer c.Close()
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096)) // the window fills at once
	_, err := fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		size, bodyOfSize(t, size))
	require.NoError(t, err)
	// The client reads nothing from here on.

	select {
	case <-cancelled:
	case <-time.After(wait):
		t.Fatal("the stalled client's engine request was never cancelled")
	}
	require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultClientStalled) == 1 }, wait, time.Millisecond)
	require.Eventually(t, func() bool { return h.handler.budget.InUse() == 0 }, wait, time.Millisecond)
	require.Zero(t, counter(t, h.reg, "completions", ResultClientAbort))

	// The budget is the other clients' again.
	h.ups[0].setInfer(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"cmpl-2","object":"text_completion","choices":[{"index":0,"text":" ok"}]}`)
	})
	resp := h.post("/v1/completions", completionsBody("hello", false))
	got := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, got)
}
