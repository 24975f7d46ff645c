package extproc

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/usage"
)

// respHeadersCT is the response-headers message of an upstream answer with
// the given status and content type, served by the pick.
func respHeadersCT(status, contentType string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
				{Key: ":status", RawValue: []byte(status)}, {Key: "content-type", RawValue: []byte(contentType)},
			}},
			EndOfStream: eos,
		}},
	}
}

// respond plays the upstream's answer to a picked stream: the headers,
// then each body chunk (the last ending the response), checking that every
// chunk goes back unchanged; then it ends the stream.
func respond(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient, status, contentType string, chunks ...string) {
	t.Helper()
	require.NoError(t, st.Send(respHeadersCT(status, contentType, false)))
	_, err := st.Recv()
	require.NoError(t, err)
	for i, c := range chunks {
		require.NoError(t, st.Send(respBody(c, i == len(chunks)-1)))
		br, err := st.Recv()
		require.NoError(t, err)
		require.Equal(t, c, string(br.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()))
	}
	require.NoError(t, st.CloseSend())
	_, err = st.Recv()
	require.Error(t, err, "the picker ends the stream")
}

// eventually waits until counter name with labels reads want: the
// router records an observation after it releases the request's load, so
// h.idle() may return first.
func eventually(t *testing.T, h *harness, want float64, name string, labels map[string]string) {
	t.Helper()
	require.Eventually(t, func() bool { return h.counter(name, labels) == want }, wait, time.Millisecond, "%s%v", name, labels)
}

// pickOne sends one completions request on a new stream and returns the
// stream and the endpoint picked.
func pickOne(t *testing.T, h *harness, body string) (extprocv3.ExternalProcessor_ProcessClient, string) {
	t.Helper()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	hr := sendRequest(t, st, body, nil)
	return st, setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader)
}

// With ObserveCachedTokens the picker reads the engine's cached_tokens from
// the response body chunks Envoy sends it, from a stream's final usage
// chunk split over two messages and from a JSON body, and ends each request
// with them: the router's accuracy loop observes both, the status page
// shows them, and the buffers go back to the body budget. An error answer
// is not read.
func TestPickerObservesCachedTokens(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{ObserveCachedTokens: true}, engineOpts{})
	defer h.close()
	body := completionsBody(prompt(1, 80, "usage"), true)

	st, dest := pickOne(t, h, body)
	respond(t, st, "200", "text/event-stream; charset=utf-8",
		"data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n",
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":90,\"prompt_tokens_details\":{\"cac",
		"hed_tokens\":32}}}\n\ndata: [DONE]\n\n")
	h.idle()
	ep := map[string]string{"endpoint": dest}
	eventually(t, h, 1, "kvroute_router_prediction_observed_total", ep)
	eventually(t, h, 32, "kvroute_router_observed_cached_tokens_total", ep)
	require.Equal(t, 1.0, h.counter("kvroute_extproc_usage_total", map[string]string{"result": usage.Observed}))

	st, dest = pickOne(t, h, completionsBody(prompt(2, 80, "usage"), false))
	respond(t, st, "200", "application/json",
		`{"id":"cmpl-1","choices":[{"text":"a"}],"usage":{"prompt_tokens":90,`,
		`"prompt_tokens_details":{"cached_tokens":48}}}`)
	h.idle()
	ep = map[string]string{"endpoint": dest}
	eventually(t, h, 2, "kvroute_router_prediction_observed_total", ep)
	eventually(t, h, 80, "kvroute_router_observed_cached_tokens_total", ep)
	require.Equal(t, 2.0, h.counter("kvroute_extproc_usage_total", map[string]string{"result": usage.Observed}))

	st, _ = pickOne(t, h, body)
	respond(t, st, "500", "application/json", `{"error":{"message":"x"},"usage":{"prompt_tokens_details":{"cached_tokens":1}}}`)
	h.idle()
	require.Equal(t, 2.0, h.counter("kvroute_router_prediction_observed_total", ep), "an error answer is not read")

	st, _ = pickOne(t, h, body)
	respond(t, st, "200", "text/event-stream", "data: {\"choices\":[{\"text\":\"a\"}]}\n\n", "data: [DONE]\n\n")
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_usage_total", map[string]string{"result": usage.Absent}),
		"a stream without include_usage")

	require.Eventually(t, func() bool { return len(h.picker.recent.List()) == 4 }, wait, time.Millisecond)
	recs := h.picker.recent.List()
	require.False(t, recs[0].Observed)
	require.False(t, recs[1].Observed, "the error answer")
	require.True(t, recs[2].Observed)
	require.Equal(t, 48, recs[2].ActualCached)
	require.Equal(t, 32, recs[3].ActualCached)
	require.Zero(t, h.picker.bodies.InUse(), "every buffer given back")
}

// Off, the default, the picker reads no usage: the loop observes nothing.
func TestPickerObservesNothingByDefault(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	st, dest := pickOne(t, h, completionsBody(prompt(1, 80, "off"), false))
	respond(t, st, "200", "application/json", `{"usage":{"prompt_tokens_details":{"cached_tokens":48}}}`)
	h.idle()
	require.Zero(t, h.counter("kvroute_router_prediction_observed_total", map[string]string{"endpoint": dest}))
	for _, r := range usage.Results {
		require.Zero(t, h.counter("kvroute_extproc_usage_total", map[string]string{"result": r}))
	}
}

// The usage buffers are charged to maxBodyBytesInFlight: a response whose
// buffer finds no room is passed through whole and unread (no_room), and a
// stream that ends in the middle of a response gives its buffer back.
func TestPickerUsageBufferWithinBodyBudget(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{ObserveCachedTokens: true, MaxBodyBytes: 8192, MaxBodyBytesInFlight: 8192}, engineOpts{})
	defer h.close()
	pad := strings.Repeat("a", 10_000)
	st, dest := pickOne(t, h, completionsBody(prompt(1, 40, "budget"), false))
	respond(t, st, "200", "application/json",
		`{"choices":[{"text":"`+pad[:4000]+`"}],`, `"pad":"`+pad+`",`, `"usage":{"prompt_tokens_details":{"cached_tokens":16}}}`)
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_usage_total", map[string]string{"result": usage.NoRoom}))
	require.Zero(t, h.counter("kvroute_router_prediction_observed_total", map[string]string{"endpoint": dest}))
	require.Zero(t, h.picker.bodies.InUse())

	// Cut short: the stream ends after the first response chunk.
	st, _ = pickOne(t, h, completionsBody(prompt(2, 40, "budget"), true))
	require.NoError(t, st.Send(respHeadersCT("200", "text/event-stream", false)))
	_, err := st.Recv()
	require.NoError(t, err)
	require.NoError(t, st.Send(respBody(fmt.Sprintf("data: {\"x\":%q", pad[:2000]), false)))
	_, err = st.Recv()
	require.NoError(t, err)
	require.Positive(t, h.picker.bodies.InUse(), "the partial line is held")
	require.NoError(t, st.CloseSend())
	_, err = st.Recv()
	require.Error(t, err)
	h.idle()
	require.Eventually(t, func() bool { return h.picker.bodies.InUse() == 0 }, wait, time.Millisecond)
	require.Equal(t, 1.0, h.counter("kvroute_extproc_aborted_total", nil))
}

// End to end through the Envoy-behaving proxy and the simulated engine:
// the picker reads the cached tokens the engine reports, in a JSON answer
// and at the end of a stream that asked for usage, and the accuracy loop
// finds the index's predictions exact, the second request's prediction a
// real hit.
func TestEndToEndPickerClosesTheAccuracyLoop(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{ObserveCachedTokens: true}, engineOpts{})
	defer h.close()
	envoy, client, stop := newEnvoy(h)
	defer stop()

	p := prompt(9, 300, "")
	resp := postThrough(t, client, envoy.URL, completionsBody(p+"first", false))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	readAll(t, resp.Body)
	ep := resp.Header.Get(EndpointHeader)
	require.Eventually(t, func() bool { return h.router.Index().Stats().Memberships > 0 }, wait, time.Millisecond)
	h.idle()

	body := `{"model":"` + testModel + `","prompt":"` + p + `second","max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`
	resp = postThrough(t, client, envoy.URL, body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, readAll(t, resp.Body), `"cached_tokens"`)
	require.Equal(t, ep, resp.Header.Get(EndpointHeader))
	h.idle()

	labels := map[string]string{"endpoint": ep}
	eventually(t, h, 2, "kvroute_router_prediction_observed_total", labels)
	require.Eventually(t, func() bool {
		cached := h.counter("kvroute_router_observed_cached_tokens_total", labels)
		return cached > 0 && cached == h.counter("kvroute_router_observed_predicted_tokens_total", labels)
	}, wait, time.Millisecond, "the second request hit, and the index predicted what the engine reused")
	require.Zero(t, h.counter("kvroute_router_prediction_stale_total", labels))
	require.Zero(t, h.counter("kvroute_router_prediction_missing_total", labels))
	require.Equal(t, 2.0, h.counter("kvroute_extproc_usage_total", map[string]string{"result": usage.Observed}))
}

// Response headers that come a second time on a stream read for its usage
// (a peer out of Envoy's order) do not keep the first read's buffer from
// the body budget: once the stream ends, the budget holds nothing of it.
func TestPickerUsageBufferReturnedWhenResponseHeadersRepeat(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{ObserveCachedTokens: true}, engineOpts{})
	defer h.close()
	st, _ := pickOne(t, h, completionsBody(prompt(2, 40, "repeat"), true))
	require.NoError(t, st.Send(respHeadersCT("200", "text/event-stream", false)))
	_, err := st.Recv()
	require.NoError(t, err)
	require.NoError(t, st.Send(respBody(`data: {"choices":[],"usage":{"prompt_tokens":`, false))) // a line cut short: buffered
	_, err = st.Recv()
	require.NoError(t, err)
	require.Positive(t, h.gauge(bodyBytesGauge), "the line's buffer is charged")
	require.NoError(t, st.Send(respHeadersCT("200", "text/event-stream", false)))
	drain(t, st)
	h.idle()
	h.bodyHeld(0)
}

// An Envoy whose ext_proc filter sends the response body STREAMED, as it
// says in the stream's first message (protocol_config), refuses a streamed
// body mutation as a spurious message, and under BUFFERED it reads one as
// an empty body that contradicts the response's content-length: in every
// mode but FULL_DUPLEX_STREAMED the picker answers each response chunk with
// a plain body response (the chunk goes on unchanged) and still reads the
// usage from it. Under FULL_DUPLEX_STREAMED, or when Envoy names no modes,
// every chunk goes back as a streamed body mutation.
func TestPickerAnswersResponseChunksInEnvoysBodyMode(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{ObserveCachedTokens: true}, engineOpts{})
	defer h.close()
	for i, mode := range []*extprocv3.ProtocolConfiguration{
		{RequestBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, ResponseBodyMode: filterv3.ProcessingMode_STREAMED},
		{RequestBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, ResponseBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED},
		nil,
		{RequestBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, ResponseBodyMode: filterv3.ProcessingMode_BUFFERED},
		{RequestBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, ResponseBodyMode: filterv3.ProcessingMode_BUFFERED_PARTIAL},
	} {
		streamed := mode != nil && mode.GetResponseBodyMode() != filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		hdrs := envoyHeaders("/v1/completions", false, nil)
		hdrs.ProtocolConfig = mode // Envoy names its modes in the stream's first message only
		require.NoError(t, st.Send(hdrs))
		require.NoError(t, st.Send(bodyChunk(completionsBody(prompt(500+i, 40, "modes"), false), true)))
		for range 2 { // the headers' answer, the body's
			_, err = st.Recv()
			require.NoError(t, err)
		}
		require.NoError(t, st.Send(respHeadersCT("200", "application/json", false)))
		_, err = st.Recv()
		require.NoError(t, err)
		chunks := []string{`{"usage":{"prompt_tokens":90,`, `"prompt_tokens_details":{"cached_tokens":16}}}`}
		for k, c := range chunks {
			require.NoError(t, st.Send(respBody(c, k == len(chunks)-1)))
			br, err := st.Recv()
			require.NoError(t, err)
			r := br.GetResponseBody()
			require.NotNil(t, r, "case %d: a body response", i)
			if streamed {
				require.Nil(t, r.GetResponse().GetBodyMutation(), "case %d: %s: the chunk goes on unchanged, no streamed mutation", i, mode.GetResponseBodyMode())
			} else {
				require.Equal(t, c, string(r.GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()), "case %d", i)
				require.Equal(t, k == len(chunks)-1, r.GetResponse().GetBodyMutation().GetStreamedResponse().GetEndOfStream(), "case %d", i)
			}
		}
		drain(t, st)
		h.idle()
		eventually(t, h, float64(i+1), "kvroute_extproc_usage_total", map[string]string{"result": usage.Observed})
	}
}
