package extproc

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

const bodyBytesGauge = "kvroute_extproc_request_body_bytes_in_flight"

// gauge reads an unlabelled gauge of the test registry (-1 when absent).
func (h *harness) gauge(name string) float64 {
	mfs, err := h.reg.Gather()
	require.NoError(h.t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// bodyHeld waits until the streams' bodies hold n bytes of the budget.
func (h *harness) bodyHeld(n float64) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return h.gauge(bodyBytesGauge) == n }, wait, 5*time.Millisecond,
		"body bytes in flight: want %v, have %v", n, h.gauge(bodyBytesGauge))
}

func TestBodyBudgetDefaultsAndValidation(t *testing.T) {
	s, err := New(Config{}, staticSource{}, Options{})
	require.NoError(t, err)
	require.EqualValues(t, DefaultMaxBodyBytesInFlight, s.cfg.MaxBodyBytesInFlight)
	s, err = New(Config{MaxBodyBytes: 1 << 30}, staticSource{}, Options{})
	require.NoError(t, err)
	require.EqualValues(t, 1<<30, s.cfg.MaxBodyBytesInFlight, "the default never refuses a body at the limit")
	_, err = New(Config{MaxBodyBytesInFlight: -1}, staticSource{}, Options{})
	require.ErrorContains(t, err, "maxBodyBytesInFlight -1 is negative")
	_, err = New(Config{MaxBodyBytes: 2048, MaxBodyBytesInFlight: 1024}, staticSource{}, Options{})
	require.ErrorContains(t, err, "below maxBodyBytes 2048")
}

// One stream holding the whole budget with a body it never finishes makes
// another stream's body find no room: that one is answered 503 with
// Retry-After at once. Once the first stream ends, its bytes are back and a
// request is routed; its body holds its share until the upstream answers.
func TestBodyBudgetRefusesWhileHeldAndAdmitsAfterTheStreamEnds(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{MaxBodyBytes: 1024, MaxBodyBytesInFlight: 1024}, engineOpts{})
	defer h.close()
	require.Zero(t, h.gauge(bodyBytesGauge))

	holder, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, holder.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, holder.Send(bodyChunk(strings.Repeat("x", 1000), false)))
	h.bodyHeld(1000)

	refused, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, refused.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, refused.Send(bodyChunk(strings.Repeat("y", 100), false)))
	resp, err := refused.Recv()
	require.NoError(t, err)
	ir := resp.GetImmediateResponse()
	require.NotNil(t, ir, "got %T", resp.Response)
	require.EqualValues(t, http.StatusServiceUnavailable, ir.GetStatus().GetCode())
	require.Equal(t, "1", setHeader(ir.GetHeaders(), "retry-after"))
	require.Contains(t, string(ir.GetBody()), "1024 bytes of request bodies in flight")
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "body_budget"}))
	h.bodyHeld(1000) // the refused stream held nothing; the holder still holds its body

	require.NoError(t, holder.CloseSend()) // the holder's stream ends, its body never finished
	h.bodyHeld(0)

	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	body := completionsBody(prompt(1, 40, "after"), false)
	hr := sendRequest(t, st, body, nil)
	dest := setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader)
	require.Equal(t, h.engines[0].id, dest)
	require.Positive(t, h.gauge(bodyBytesGauge), "the body is held until the upstream answers")
	require.NoError(t, st.Send(respHeaders(dest, true)))
	_, err = st.Recv()
	require.NoError(t, err)
	require.Zero(t, h.gauge(bodyBytesGauge), "the upstream answered: the body is released before the answer to its headers")
	require.NoError(t, st.CloseSend())
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "routed"}))
	h.bodyHeld(0)
}

// A body's buffer grows by doubling as its chunks arrive, never past
// MaxBodyBytes: a slow body holds at most twice what it has sent.
func TestBodyBudgetChargesTheBufferAsChunksArrive(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{MaxBodyBytes: 1024, MaxBodyBytesInFlight: 4096}, engineOpts{})
	defer h.close()
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	st, err := h.client.Process(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	for _, c := range []struct {
		chunk int
		held  float64
	}{{10, 10}, {10, 20}, {5, 40}, {15, 40}, {500, 540}, {100, 1024}, {384, 1024}} {
		require.NoError(t, st.Send(bodyChunk(strings.Repeat("z", c.chunk), false)))
		h.bodyHeld(c.held)
	}
	cancel()
	h.bodyHeld(0)
}

// Every way a stream ends gives its body's bytes back: a reset in the
// middle of the body, a reset after the pick before any response, a
// protocol error, a body over the limit.
func TestBodyBudgetReleasedWhateverEndsTheStream(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{MaxBodyBytes: 1024, MaxBodyBytesInFlight: 1024}, engineOpts{})
	defer h.close()

	// Reset in the middle of the body.
	ctx, cancel := context.WithCancel(ctxT(t))
	st, err := h.client.Process(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk(strings.Repeat("x", 700), false)))
	h.bodyHeld(700)
	cancel()
	h.bodyHeld(0)

	// Reset after the pick, before the upstream answered.
	ctx, cancel = context.WithCancel(ctxT(t))
	st, err = h.client.Process(ctx)
	require.NoError(t, err)
	sendRequest(t, st, completionsBody(prompt(2, 40, "reset"), false), nil)
	require.Positive(t, h.gauge(bodyBytesGauge))
	cancel()
	h.bodyHeld(0)

	// A protocol error: the request headers again in the middle of the body.
	st, err = h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk(strings.Repeat("x", 300), false)))
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	_, err = st.Recv()
	require.Error(t, err)
	h.bodyHeld(0)

	// A body over the limit after part of it was buffered.
	st, err = h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk(strings.Repeat("x", 600), false)))
	_ = st.Send(bodyChunk(strings.Repeat("x", 600), false)) // the picker may have answered already
	resp, err := st.Recv()
	require.NoError(t, err)
	require.EqualValues(t, http.StatusRequestEntityTooLarge, resp.GetImmediateResponse().GetStatus().GetCode())
	h.bodyHeld(0)

	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_protocol_errors_total", map[string]string{"message": "request_headers"}))
}
