package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// The engines' pools are warmed to the peak of requests that can reach an
// engine, not of requests still sending their body: 32 clients that open
// a request and trickle its body (or send one the gateway refuses) hold
// nothing of an engine. Counted from their first byte, they raised the
// peak the warmer dials each engine to, so that the next request to an
// engine had it dial 32 connections there, on the word of clients that
// never sent a complete request.
func TestGatewayWarmsNoEngineForRequestsStillSendingTheirBody(t *testing.T) {
	defer leakcheck.Check(t)()
	const slow = 32
	e := newBarrierEngine(1)
	defer e.Close()
	h := newPoolHandler(t, Config{}, e)
	defer h.Close()

	var wg sync.WaitGroup
	writers := make([]*io.PipeWriter, slow)
	for i := range writers {
		pr, pw := io.Pipe()
		writers[i] = pw
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodPost, "/v1/completions", pr)
			req.ContentLength = -1 // chunked: the first buffer is 8 KiB, charged before it is read into
			h.ServeHTTP(httptest.NewRecorder(), req)
		})
	}
	defer func() { // the slow clients give up: their requests end
		for _, pw := range writers {
			pw.CloseWithError(io.ErrUnexpectedEOF)
		}
		wg.Wait()
		require.Zero(t, h.budget.InUse())
	}()
	for _, pw := range writers {
		_, err := pw.Write([]byte(`{"model":"m","prompt":"`))
		require.NoError(t, err)
	}
	waitFor(t, "every slow body in its read", func() bool { return h.budget.InUse() == slow*8<<10 })

	proxyRounds(t, h, 1, 1)
	h.ownsTr.WaitWarmers() // the one request has ended: no warmer starts meanwhile
	id := strings.TrimPrefix(e.URL, "http://")
	require.Equal(t, 1, h.ownsTr.IdleConns(id), "the engine's pool holds the connection of the one request that reached it")
	require.Equal(t, int64(1), e.Accepted())
}
