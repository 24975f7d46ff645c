package extproc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// headersNoID is the request-headers message of a client that sends no
// x-request-id (the router then has no request table entry to refuse a
// second pick with).
func headersNoID(path string) *extprocv3.ProcessingRequest {
	hv := func(k, v string) *corev3.HeaderValue { return &corev3.HeaderValue{Key: k, RawValue: []byte(v)} }
	return &extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
				hv(":method", "POST"), hv(":path", path), hv(":authority", "gateway"), hv(":scheme", "http"),
				hv("content-type", "application/json"),
			}},
		}},
	}
}

// drain half-closes the stream and reads the picker's answers up to the
// stream's end, returning them and the status it ended with.
func drain(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient) ([]*extprocv3.ProcessingResponse, *status.Status) {
	t.Helper()
	_ = st.CloseSend() // the picker may have ended the stream already
	var answers []*extprocv3.ProcessingResponse
	for {
		resp, err := st.Recv()
		if err != nil {
			if err == io.EOF {
				return answers, status.New(codes.OK, "")
			}
			s, ok := status.FromError(err)
			require.True(t, ok, "a gRPC status: %v", err)
			return answers, s
		}
		answers = append(answers, resp)
	}
}

// A client that keeps sending request messages after the request's end of
// stream (another end-of-stream body: empty, valid JSON, garbage; or
// trailers twice; or the headers again) gets one InvalidArgument status;
// the stream ends, the one decision it made is released, nothing else is
// picked, and the error is counted by message kind. Render on (the prompt's
// tokens are committed at the pick) and off (routed by load alone).
func TestProcessMessagesAfterEndOfStreamAreAProtocolError(t *testing.T) {
	type extra struct {
		name  string
		msgs  []*extprocv3.ProcessingRequest // sent after the request's end of stream
		acked int                            // of msgs, answered normally before the status
		kind  string
	}
	trailers := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
		RequestTrailers: &extprocv3.HttpTrailers{}}}
	extras := []extra{
		{"empty body", []*extprocv3.ProcessingRequest{bodyChunk("", true)}, 0, protoRequestBody},
		{"empty body twice", []*extprocv3.ProcessingRequest{bodyChunk("", true), bodyChunk("", true)}, 0, protoRequestBody},
		{"valid JSON body", []*extprocv3.ProcessingRequest{bodyChunk(completionsBody(prompt(21, 30, "again"), false), true)}, 0, protoRequestBody},
		{"garbage body", []*extprocv3.ProcessingRequest{bodyChunk("\x00garbage{", true)}, 0, protoRequestBody},
		{"body without end of stream", []*extprocv3.ProcessingRequest{bodyChunk(" ", false)}, 0, protoRequestBody},
		{"headers again", []*extprocv3.ProcessingRequest{headersNoID("/v1/completions")}, 0, protoRequestHeaders},
		{"trailers twice", []*extprocv3.ProcessingRequest{trailers, trailers}, 1, protoRequestTrailers},
	}
	for _, render := range []bool{true, false} {
		t.Run(fmt.Sprintf("render=%v", render), func(t *testing.T) {
			defer leakcheck.Check(t)()
			h := newHarness(t, Config{}, engineOpts{noRender: !render})
			defer h.close()
			id := h.engines[0].id
			want := map[string]float64{}
			for i, x := range extras {
				for _, withID := range []bool{false, true} {
					st, err := h.client.Process(ctxT(t))
					require.NoError(t, err)
					body := completionsBody(prompt(20+i, 60, x.name), false)
					if withID {
						require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
					} else {
						require.NoError(t, st.Send(headersNoID("/v1/completions")))
					}
					require.NoError(t, st.Send(bodyChunk(body, true)))
					hr, err := st.Recv()
					require.NoError(t, err)
					require.Equal(t, id, setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader))
					_, err = st.Recv() // the body's answer
					require.NoError(t, err)
					tokens, reqs := h.load(id)
					require.EqualValues(t, 1, reqs, x.name)
					if render {
						require.Positive(t, tokens, "%s: the prompt's tokens are committed", x.name)
					} else {
						require.Zero(t, tokens, "%s: routed by load alone", x.name)
					}

					for _, m := range x.msgs {
						_ = st.Send(m) // the picker may have ended the stream already
					}
					// The load stays until the stream ends (the picker holds it
					// for a response that will not come).
					answers, s := drain(t, st)
					h.idle() // the stream ended: its one decision was released
					require.Len(t, answers, x.acked, "%s: answered once, by the status", x.name)
					for _, a := range answers {
						require.NotNil(t, a.GetRequestTrailers(), x.name)
					}
					require.Equal(t, codes.InvalidArgument, s.Code(), "%s: %v", x.name, s)
					require.Contains(t, s.Message(), "after the request's end of stream", x.name)
					want[x.kind]++
					require.Equal(t, want[x.kind], h.counter("kvroute_extproc_protocol_errors_total", map[string]string{"message": x.kind}), x.name)
				}
			}
			require.Equal(t, float64(2*len(extras)), h.counter("kvroute_extproc_requests_total", map[string]string{"result": "routed"}),
				"one pick per stream")
			require.Equal(t, float64(2*len(extras)), h.counter("kvroute_extproc_aborted_total", nil))
			for _, k := range protocolErrorKinds {
				require.Equal(t, want[k], h.counter("kvroute_extproc_protocol_errors_total", map[string]string{"message": k}), k)
			}
		})
	}
}

// Trailers after the body's end of stream are acknowledged, not picked
// again: the request keeps its one decision until its response ends.
func TestProcessTrailersAfterBodyEndKeepTheOneDecision(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	id := h.engines[0].id
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	sendRequest(t, st, completionsBody(prompt(30, 40, "trailers"), false), nil)
	require.NoError(t, st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
		RequestTrailers: &extprocv3.HttpTrailers{}}}))
	tr, err := st.Recv()
	require.NoError(t, err)
	require.NotNil(t, tr.GetRequestTrailers())
	_, reqs := h.load(id)
	require.EqualValues(t, 1, reqs)
	require.NoError(t, st.Send(respHeaders(id, false)))
	_, err = st.Recv()
	require.NoError(t, err)
	require.NoError(t, st.Send(respBody("{}", true)))
	_, err = st.Recv()
	require.NoError(t, err)
	h.idle()
	require.NoError(t, st.CloseSend())
	_, err = st.Recv()
	require.Error(t, err) // io.EOF: the picker ended the stream normally
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "routed"}))
	require.Zero(t, h.counter("kvroute_extproc_aborted_total", nil))
	for _, k := range protocolErrorKinds {
		require.Zero(t, h.counter("kvroute_extproc_protocol_errors_total", map[string]string{"message": k}), k)
	}
}

// A request that trailers end (Envoy sends its body chunks without end of
// stream, then the trailers) is picked at the trailers, and its body goes
// back with no chunk ending the stream: StreamedBodyResponse.end_of_stream
// is set only after a body request that set it, and Envoy would end the
// request to the engine before the trailers it still holds. The trailers'
// answer, after the body's, completes the request; its response path then
// releases it. A body in one chunk and one in three.
func TestProcessRequestEndedByTrailersIsCompletedByTheTrailersAnswer(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	id := h.engines[0].id
	for i, size := range []int{200, maxBodyChunk*2 + 1000} {
		body := completionsBody(strings.Repeat("w ", size/2), false)
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
		for off := 0; off < len(body); off += 16 << 10 { // Envoy's chunks, none ending the stream
			require.NoError(t, st.Send(bodyChunk(body[off:min(off+16<<10, len(body))], false)))
		}
		require.NoError(t, st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
			RequestTrailers: &extprocv3.HttpTrailers{}}}))
		hr, err := st.Recv()
		require.NoError(t, err)
		require.Equal(t, id, setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader), "case %d", i)
		var got strings.Builder
		chunks := 0
		for got.Len() < len(body) {
			br, err := st.Recv()
			require.NoError(t, err)
			sr := br.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
			require.NotNil(t, sr, "case %d: answer %d is a streamed body mutation (got %T)", i, chunks, br.Response)
			require.False(t, sr.GetEndOfStream(), "case %d: chunk %d ends the stream, though Envoy sent no body end of stream", i, chunks)
			got.Write(sr.GetBody())
			chunks++
		}
		require.Equal(t, body, got.String(), "case %d: the body goes back unchanged", i)
		require.Equal(t, (len(body)+maxBodyChunk-1)/maxBodyChunk, chunks, "case %d", i)
		tr, err := st.Recv()
		require.NoError(t, err)
		require.NotNil(t, tr.GetRequestTrailers(), "case %d: the trailers' answer follows the body's (got %T)", i, tr.Response)
		_, reqs := h.load(id)
		require.EqualValues(t, 1, reqs, "case %d", i)

		require.NoError(t, st.Send(respHeaders(id, false)))
		_, err = st.Recv()
		require.NoError(t, err)
		require.NoError(t, st.Send(respBody("{}", true)))
		_, err = st.Recv()
		require.NoError(t, err)
		answers, s := drain(t, st)
		require.Equal(t, codes.OK, s.Code(), "case %d", i)
		require.Empty(t, answers, "case %d", i)
		h.idle()
	}
	require.Equal(t, 2.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "routed"}))
	require.Zero(t, h.counter("kvroute_extproc_aborted_total", nil))
}

// A stream cancelled at any point releases whatever it holds: after the
// pick (before any response), between response chunks, and halfway through
// the request body (nothing picked yet). The router ends up idle every time.
func TestProcessCancelledStreamReleasesItsDecision(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	id := h.engines[0].id
	steps := map[string]func(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient){
		"after the pick": func(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient) {
			sendRequest(t, st, completionsBody(prompt(31, 60, "cancel-pick"), false), nil)
		},
		"after the response headers": func(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient) {
			sendRequest(t, st, completionsBody(prompt(32, 60, "cancel-headers"), true), nil)
			require.NoError(t, st.Send(respHeaders(id, false)))
			_, err := st.Recv()
			require.NoError(t, err)
		},
		"before the first chunk's answer": func(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient) {
			sendRequest(t, st, completionsBody(prompt(33, 60, "cancel-chunk"), true), nil)
			require.NoError(t, st.Send(respHeaders(id, false)))
			_, err := st.Recv()
			require.NoError(t, err)
			require.NoError(t, st.Send(respBody("data: {}\n\n", false)))
		},
		"halfway through the body": func(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient) {
			require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
			require.NoError(t, st.Send(bodyChunk(`{"model":"`+testModel+`","prompt":"half`, false)))
		},
	}
	picked := 0.0
	for name, step := range steps {
		ctx, cancel := context.WithCancel(ctxT(t))
		st, err := h.client.Process(ctx)
		require.NoError(t, err)
		step(t, st)
		if name != "halfway through the body" {
			picked++
			_, reqs := h.load(id)
			require.EqualValues(t, 1, reqs, name)
		}
		cancel() // Envoy resets the stream when the client goes away
		h.idle()
		require.Eventually(t, func() bool { return h.counter("kvroute_extproc_aborted_total", nil) == picked },
			wait, 5*time.Millisecond, name)
	}
	require.Equal(t, picked, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "routed"}))
}

// A stream that ends before the pick, after its request headers and part
// of its body, or after its headers alone (the client left: Envoy ends
// the stream), is counted as client_abort and leaves no load behind; a stream that
// ends before any request message counts nothing.
func TestStreamEndedBeforeThePickIsAClientAbort(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	abort := map[string]string{"result": resultClientAbort}

	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk(`{"model":"m","prompt":"hal`, false)))
	_, s := drain(t, st)
	require.Equal(t, codes.OK, s.Code())
	require.Eventually(t, func() bool { return h.counter("kvroute_extproc_requests_total", abort) == 1 }, wait, time.Millisecond)

	// Only headers, then the end of the stream. (A cancelled stream takes
	// the same path, but a test cannot know when the picker has read the
	// headers a cancel may overtake, so it is not driven here.)
	st, err = h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	_, s = drain(t, st)
	require.Equal(t, codes.OK, s.Code())
	require.Eventually(t, func() bool { return h.counter("kvroute_extproc_requests_total", abort) == 2 }, wait, time.Millisecond)

	st, err = h.client.Process(ctxT(t))
	require.NoError(t, err)
	_, s = drain(t, st)
	require.Equal(t, codes.OK, s.Code())
	h.idle()
	require.Equal(t, 2.0, h.counter("kvroute_extproc_requests_total", abort), "a stream without a request is no abort")
	_, n := h.load(h.engines[0].id)
	require.Zero(t, n)
}

// An Envoy whose ext_proc filter does not send the request body
// FULL_DUPLEX_STREAMED (NONE, STREAMED, BUFFERED, BUFFERED_PARTIAL), as it
// says in the stream's first message (protocol_config), waits for the
// request headers' answer before it sends the body, if it sends one at
// all, while the picker waits for the body to pick: the request hung until
// Envoy's message_timeout. The picker answers such a request at once, 500
// naming the mode it needs, counted as result body_mode; a request whose
// headers end it (GET /v1/models) is still served, and a stream naming no
// modes (an Envoy before protocol_config) is waited on as before.
func TestProcessRequestBodyModeOtherThanFullDuplexIsRefusedAtOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	modes := []filterv3.ProcessingMode_BodySendMode{filterv3.ProcessingMode_NONE, filterv3.ProcessingMode_STREAMED,
		filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_BUFFERED_PARTIAL}
	for _, mode := range modes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // well before any message_timeout
		st, err := h.client.Process(ctx)
		require.NoError(t, err)
		hdrs := envoyHeaders("/v1/completions", false, nil)
		hdrs.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: mode, ResponseBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED}
		require.NoError(t, st.Send(hdrs))
		resp, err := st.Recv()
		require.NoError(t, err, "%s: answered without a body message", mode)
		ir := resp.GetImmediateResponse()
		require.NotNil(t, ir, "%s", mode)
		require.EqualValues(t, http.StatusInternalServerError, ir.GetStatus().GetCode(), "%s", mode)
		require.Contains(t, string(ir.GetBody()), "FULL_DUPLEX_STREAMED", "%s", mode)
		require.Contains(t, string(ir.GetBody()), mode.String(), "%s", mode)
		cancel()
	}
	h.idle()
	require.Equal(t, float64(len(modes)), h.counter("kvroute_extproc_requests_total", map[string]string{"result": "body_mode"}))

	// A bodyless request needs no body mode.
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	hdrs := envoyHeaders("/v1/models", true, nil)
	hdrs.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: filterv3.ProcessingMode_BUFFERED}
	require.NoError(t, st.Send(hdrs))
	resp, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, h.engines[0].id, setHeader(resp.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader))
	drain(t, st)
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "passthrough"}))
}

// A request body or trailers before the request headers break the stream's
// order as much as a body after the request's end of stream: the stream
// ends with one InvalidArgument status naming it, counted by message kind,
// and nothing is picked (the headers that might follow would otherwise
// meet a pick already made, without the request's path or headers).
func TestProcessRequestMessagesBeforeTheHeadersAreAProtocolError(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	trailers := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
		RequestTrailers: &extprocv3.HttpTrailers{}}}
	cases := []struct {
		name string
		msgs []*extprocv3.ProcessingRequest
		kind string
	}{
		{"body ending the request", []*extprocv3.ProcessingRequest{bodyChunk(completionsBody(prompt(1, 30, "early"), false), true)}, protoRequestBody},
		{"body chunk", []*extprocv3.ProcessingRequest{bodyChunk(`{"model":`, false)}, protoRequestBody},
		{"trailers", []*extprocv3.ProcessingRequest{trailers}, protoRequestTrailers},
	}
	want := map[string]float64{}
	for _, c := range cases {
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		for _, m := range c.msgs {
			_ = st.Send(m) // the picker may have ended the stream already
		}
		_ = st.Send(envoyHeaders("/v1/completions", true, nil))
		answers, s := drain(t, st)
		require.Empty(t, answers, "%s: nothing answered", c.name)
		require.Equal(t, codes.InvalidArgument, s.Code(), "%s: %v", c.name, s)
		require.Contains(t, s.Message(), "before the request headers", c.name)
		want[c.kind]++
		require.Equal(t, want[c.kind], h.counter("kvroute_extproc_protocol_errors_total", map[string]string{"message": c.kind}), c.name)
	}
	for _, r := range results {
		require.Zero(t, h.counter("kvroute_extproc_requests_total", map[string]string{"result": r}), "%s: nothing picked", r)
	}
	h.idle()
}
