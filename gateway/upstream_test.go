package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A client that goes away while the engine has not answered yet (prefill)
// cancels the upstream request at once: the engine sees it cancelled, the
// load is released and the request counts as a client abort.
func TestGatewayCancelsTheEngineWhenTheClientAbortsBeforeTheAnswer(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	ep := h.eps[0].ID
	resp := h.post("/v1/completions", completionsBody("warm up", false))
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1, h.handler.ownsTr.IdleConns(ep), "the first request's connection is pooled")
	arrived, engineSawCancel, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	defer close(release)
	h.ups[0].setInfer(func(_ http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
			close(engineSawCancel)
		case <-release:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.gw.URL+"/v1/completions",
		strings.NewReader(completionsBody("hello there", false)))
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		resp, err := h.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	recv(t, arrived, "the request to reach the engine")
	cancel()
	require.Error(t, <-errc)
	recv(t, engineSawCancel, "the engine to see the request cancelled")
	require.Eventually(t, func() bool { tok, n := h.load(ep); return tok == 0 && n == 0 }, wait, time.Millisecond)
	require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultClientAbort) == 1 }, wait, time.Millisecond)
	require.Zero(t, h.handler.ownsTr.IdleConns(ep), "the cancelled connection is closed, not pooled")
}

// GET /v1/models, which goes to the engine with no body (http.NoBody), is
// sent once more on a new connection when the engine closes the reused
// keep-alive connection before answering, as an inference POST is: before,
// only requests whose body could be read again were, and the client got a
// 502 that the next connection would have answered.
func TestGatewayResendsModelsWhenTheEngineClosesAReusedConnectionUnanswered(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	var n atomic.Int64
	h.ups[0].setInfer(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) == 2 { // the second request, on the kept-alive connection: read, then closed unanswered
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = c.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	})
	for i := range 2 {
		resp, err := h.client.Get(h.gw.URL + "/v1/models")
		require.NoError(t, err)
		got := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, "GET /v1/models #%d: %s", i+1, got)
	}
	require.Equal(t, int64(3), n.Load(), "the second GET reached the engine twice")
}

// An inference request the gateway sends to its engine a second time,
// because the engine closed the reused keep-alive connection before any
// byte of answer, is counted in kvroute_gateway_upstream_resends_total:
// the client sees one answer, but an engine that had read the request may
// have run it twice, which the operator must be able to see.
func TestGatewayCountsTheRequestsItResends(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	require.Zero(t, metricValue(t, h.reg, "kvroute_gateway_upstream_resends_total"))
	var n atomic.Int64
	h.ups[0].setInfer(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) == 2 { // the second request, on the kept-alive connection: read, then closed unanswered
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = c.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[]}`)
	})
	for i := range 2 {
		resp := h.post("/v1/completions", completionsBody("hello", false))
		got := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, "request #%d: %s", i+1, got)
	}
	require.Equal(t, int64(3), n.Load(), "the second request reached the engine twice")
	require.Equal(t, 1.0, metricValue(t, h.reg, "kvroute_gateway_upstream_resends_total"))
	require.Eventually(t, func() bool { return counter(t, h.reg, "completions", ResultSuccess) == 2 }, wait, time.Millisecond,
		"the result is counted as the handler returns, after the client read the answer")
}
