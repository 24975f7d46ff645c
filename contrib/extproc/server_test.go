package extproc

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/tokenload"
)

// requestIDs numbers the x-request-id of envoyHeaders, unique per stream as
// Envoy's are.
var requestIDs atomic.Int64

// envoyHeaders is the request-headers message Envoy sends for a POST.
func envoyHeaders(path string, eos bool, md *corev3.Metadata) *extprocv3.ProcessingRequest {
	return envoyHeadersID(path, eos, md, fmt.Sprintf("req-%d", requestIDs.Add(1)))
}

// envoyHeadersID is envoyHeaders with a given x-request-id.
func envoyHeadersID(path string, eos bool, md *corev3.Metadata, id string) *extprocv3.ProcessingRequest {
	hv := func(k, v string) *corev3.HeaderValue { return &corev3.HeaderValue{Key: k, RawValue: []byte(v)} }
	return &extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
				hv(":method", "POST"), hv(":path", path), hv(":authority", "gateway"), hv(":scheme", "http"),
				hv("content-type", "application/json"), hv("x-request-id", id),
			}},
			EndOfStream: eos,
		}},
		MetadataContext: md,
	}
}

func bodyChunk(b string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: eos}}}
}

func respHeaders(served string, eos bool) *extprocv3.ProcessingRequest {
	inner, _ := structpb.NewStruct(map[string]any{DefaultServedKey: served})
	return &extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
			Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
				{Key: ":status", RawValue: []byte("200")}, {Key: "content-type", RawValue: []byte("text/event-stream")},
			}},
			EndOfStream: eos,
		}},
		MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{DefaultMetadataNamespace: inner}},
	}
}

func respBody(b string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: eos}}}
}

func subsetMD(ids ...string) *corev3.Metadata {
	vals := make([]any, len(ids))
	for i, id := range ids {
		vals[i] = id
	}
	inner, _ := structpb.NewStruct(map[string]any{DefaultSubsetKey: vals})
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{DefaultSubsetNamespace: inner}}
}

func setHeader(m *extprocv3.HeaderMutation, key string) string {
	for _, h := range m.GetSetHeaders() {
		if strings.EqualFold(h.GetHeader().GetKey(), key) {
			return string(h.GetHeader().GetRawValue())
		}
	}
	return ""
}

// sendRequest sends headers and the body in two chunks and returns the
// picker's header answer after checking its body answer.
func sendRequest(t *testing.T, st extprocv3.ExternalProcessor_ProcessClient, body string, md *corev3.Metadata) *extprocv3.ProcessingResponse {
	t.Helper()
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, md)))
	half := len(body) / 2
	require.NoError(t, st.Send(bodyChunk(body[:half], false)))
	require.NoError(t, st.Send(bodyChunk(body[half:], true)))
	hr, err := st.Recv()
	require.NoError(t, err)
	require.NotNil(t, hr.GetRequestHeaders(), "the first answer is the request headers' (got %T)", hr.Response)
	br, err := st.Recv()
	require.NoError(t, err)
	sr := br.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
	require.NotNil(t, sr)
	require.True(t, sr.GetEndOfStream())
	require.Equal(t, body, string(sr.GetBody()), "the buffered body goes back unchanged")
	return hr
}

// The whole message sequence Envoy sends for a streamed completion: the
// destination arrives in the header and in envoy.lb metadata, load is held
// until the first chunk (prompt) and the end of stream (request), and every
// response chunk passes back unchanged.
func TestProcessFullSequenceNamesEndpointAndAccountsLoad(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{}, engineOpts{})
	defer h.close()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)

	hr := sendRequest(t, st, completionsBody(prompt(1, 80, "first"), true), nil)
	mut := hr.GetRequestHeaders().GetResponse().GetHeaderMutation()
	dest := setHeader(mut, DefaultDestinationHeader)
	require.Contains(t, []string{h.engines[0].id, h.engines[1].id}, dest)
	require.True(t, hr.GetRequestHeaders().GetResponse().GetClearRouteCache())
	md := hr.GetDynamicMetadata().GetFields()[DefaultMetadataNamespace].GetStructValue().GetFields()[DefaultDestinationHeader]
	require.Equal(t, dest, md.GetStringValue(), "header and metadata never disagree")
	require.NotEmpty(t, setHeader(mut, "content-length"))

	tokens, reqs := h.load(dest)
	require.EqualValues(t, 1, reqs)
	require.Positive(t, tokens, "the prompt's tokens are committed until the first chunk")

	require.NoError(t, st.Send(respHeaders(dest, false)))
	rh, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, dest, setHeader(rh.GetResponseHeaders().GetResponse().GetHeaderMutation(), EndpointHeader))

	for i, chunk := range []string{"data: {\"a\":1}\n\n", "data: {\"a\":2}\n\n"} {
		require.NoError(t, st.Send(respBody(chunk, false)))
		br, err := st.Recv()
		require.NoError(t, err)
		require.Equal(t, chunk, string(br.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()))
		if i == 0 {
			tokens, reqs = h.load(dest)
			require.EqualValues(t, 1, reqs, "the request stays in flight while it decodes")
			require.Zero(t, tokens, "the first chunk releases the prompt tokens")
		}
	}
	require.NoError(t, st.Send(respBody("data: [DONE]\n\n", true)))
	br, err := st.Recv()
	require.NoError(t, err)
	require.True(t, br.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetEndOfStream())
	tokens, reqs = h.load(dest)
	require.Zero(t, reqs)
	require.Zero(t, tokens)

	require.NoError(t, st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{
		ResponseTrailers: &extprocv3.HttpTrailers{}}}))
	_, err = st.Recv()
	require.NoError(t, err)
	require.NoError(t, st.CloseSend())
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "routed"}))
	require.Zero(t, h.counter("kvroute_extproc_aborted_total", nil))
}

// A client that disconnects after the pick resets the stream; the load is
// released exactly once, at the stream's end.
func TestProcessClientAbortReleasesLoadOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	ctx, cancel := context.WithCancel(ctxT(t))
	st, err := h.client.Process(ctx)
	require.NoError(t, err)
	hr := sendRequest(t, st, completionsBody(prompt(2, 40, "abort"), true), nil)
	dest := setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader)
	_, reqs := h.load(dest)
	require.EqualValues(t, 1, reqs)
	require.NoError(t, st.Send(respHeaders(dest, false)))
	_, err = st.Recv()
	require.NoError(t, err)
	require.NoError(t, st.Send(respBody("data: {}\n\n", false)))
	_, err = st.Recv()
	require.NoError(t, err)
	cancel() // Envoy resets the stream when the client goes away
	h.idle()
	require.Eventually(t, func() bool { return h.counter("kvroute_extproc_aborted_total", nil) == 1 }, wait, 5*time.Millisecond)
}

func TestProcessBodyOverLimitIsAnswered413AndHoldsNothing(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{MaxBodyBytes: 64}, engineOpts{})
	defer h.close()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk(strings.Repeat("x", 40), false)))
	_ = st.Send(bodyChunk(strings.Repeat("y", 40), true)) // the picker may have answered already
	resp, err := st.Recv()
	require.NoError(t, err)
	ir := resp.GetImmediateResponse()
	require.NotNil(t, ir)
	require.EqualValues(t, http.StatusRequestEntityTooLarge, ir.GetStatus().GetCode())
	require.Contains(t, string(ir.GetBody()), "64 bytes")
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "body_too_large"}))
}

func TestProcessSubsetHint(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{}, engineOpts{})
	defer h.close()
	for _, want := range []string{h.engines[0].id, h.engines[1].id} {
		for range 3 {
			st, err := h.client.Process(ctxT(t))
			require.NoError(t, err)
			hr := sendRequest(t, st, completionsBody(prompt(3, 40, "subset"), false), subsetMD(want, "10.0.0.9:8000"))
			require.Equal(t, want, setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader))
			require.NoError(t, st.CloseSend())
		}
	}
	h.idle() // streams that ended without a response released their load

	// A hint that names no known endpoint, and an empty hint, are 503.
	for _, md := range []*corev3.Metadata{subsetMD("10.0.0.9:8000"), subsetMD()} {
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, md)))
		require.NoError(t, st.Send(bodyChunk(completionsBody("x", false), true)))
		resp, err := st.Recv()
		require.NoError(t, err)
		require.EqualValues(t, http.StatusServiceUnavailable, resp.GetImmediateResponse().GetStatus().GetCode())
		require.Equal(t, "rejected-no-endpoints", setHeader(resp.GetImmediateResponse().GetHeaders(), HeaderDroppedReason))
	}
}

func TestProcessNoEndpointIs503(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{})
	defer h.close()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk(completionsBody("x", false), true)))
	resp, err := st.Recv()
	require.NoError(t, err)
	require.EqualValues(t, http.StatusServiceUnavailable, resp.GetImmediateResponse().GetStatus().GetCode())
	// llm-d's picker names why it dropped the request in this header.
	require.Equal(t, "rejected-no-endpoints", setHeader(resp.GetImmediateResponse().GetHeaders(), HeaderDroppedReason))
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "no_endpoint"}))
}

func TestProcessBadJSONIs400(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk("{not json", true)))
	resp, err := st.Recv()
	require.NoError(t, err)
	require.EqualValues(t, http.StatusBadRequest, resp.GetImmediateResponse().GetStatus().GetCode())
	h.idle()
}

// A render failure routes by load, and says so in the response headers.
func TestProcessRenderFailureRoutesByLoadAndSaysSo(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{noRender: true})
	defer h.close()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	hr := sendRequest(t, st, completionsBody(prompt(4, 20, "norender"), false), nil)
	mut := hr.GetRequestHeaders().GetResponse().GetHeaderMutation()
	require.Equal(t, h.engines[0].id, setHeader(mut, DefaultDestinationHeader))
	require.NoError(t, st.Send(respHeaders(h.engines[0].id, true)))
	rh, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, "true", setHeader(rh.GetResponseHeaders().GetResponse().GetHeaderMutation(), RenderFallbackHeader))
	h.idle() // response headers with end of stream ended the request
	require.Equal(t, 1.0, h.counter("kvroute_extproc_render_fallbacks_total", nil))
}

// Envoy reports another served endpoint than the pick (a retry): counted.
func TestProcessServedMismatchIsCounted(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	sendRequest(t, st, completionsBody(prompt(5, 20, "retry"), false), nil)
	require.NoError(t, st.Send(respHeaders("10.1.2.3:8000", false)))
	_, err = st.Recv()
	require.NoError(t, err)
	require.NoError(t, st.Send(respBody("{}", true)))
	_, err = st.Recv()
	require.NoError(t, err)
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_served_mismatch_total", nil))
}

// A request without a body (GET /v1/models) is answered at its headers.
func TestProcessBodylessRequestIsPassedThrough(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/models", true, nil)))
	resp, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, h.engines[0].id, setHeader(resp.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader))
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "passthrough"}))
}

// An empty request body Envoy sends as a body (the headers without end of
// stream, then one empty chunk ending it: an HTTP/1 chunked request with no
// data, an HTTP/2 empty DATA frame with END_STREAM) is answered as a body,
// since Envoy forwards only what the picker streams back: on an inference
// path it is no JSON and answered 400; elsewhere it is passed through, its
// headers answered with content-length 0 and its body with one empty chunk
// ending the stream, so that Envoy ends the request to the engine.
func TestProcessEmptyBodyEndingTheStreamIsAnswered(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()

	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk("", true)))
	resp, err := st.Recv()
	require.NoError(t, err)
	ir := resp.GetImmediateResponse()
	require.NotNil(t, ir, "an inference request's empty body is answered 400 (got %T)", resp.Response)
	require.EqualValues(t, http.StatusBadRequest, ir.GetStatus().GetCode())
	require.Contains(t, string(ir.GetBody()), "not a JSON object")
	_, s := drain(t, st)
	require.Equal(t, "OK", s.Code().String())
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": resultBadRequest}))

	st, err = h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/models", false, nil)))
	require.NoError(t, st.Send(bodyChunk("", true)))
	resp, err = st.Recv()
	require.NoError(t, err)
	mut := resp.GetRequestHeaders().GetResponse().GetHeaderMutation()
	require.Equal(t, h.engines[0].id, setHeader(mut, DefaultDestinationHeader))
	require.Equal(t, "0", setHeader(mut, "content-length"))
	resp, err = st.Recv()
	require.NoError(t, err)
	sr := resp.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
	require.NotNil(t, sr, "the empty body is answered (got %T)", resp.Response)
	require.Empty(t, sr.GetBody())
	require.True(t, sr.GetEndOfStream(), "the answer ends the request's stream")
	answers, s := drain(t, st)
	require.Equal(t, "OK", s.Code().String())
	require.Empty(t, answers, "one answer to the headers, one to the body")
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": resultPassthrough}))
	h.idle()
}

func TestHealthReportsReadiness(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	hc := healthpb.NewHealthClient(h.conn)
	check := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		resp, err := hc.Check(ctxT(t), &healthpb.HealthCheckRequest{Service: svc})
		require.NoError(t, err)
		return resp.GetStatus()
	}
	for _, svc := range []string{LivenessService, ReadinessService, ExtProcService} {
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, check(svc), svc)
	}
	h.picker.SetReady(false)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, check(LivenessService))
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, check(ReadinessService))
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, check(ExtProcService))
}

// Two streams with the same x-request-id in flight: the second is a 409.
func TestProcessDuplicateRequestIDIs409(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	first, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	body := completionsBody(prompt(11, 20, "dup"), false)
	require.NoError(t, first.Send(envoyHeadersID("/v1/completions", false, nil, "dup-1")))
	require.NoError(t, first.Send(bodyChunk(body, true)))
	_, err = first.Recv() // picked: dup-1 is in flight
	require.NoError(t, err)
	second, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, second.Send(envoyHeadersID("/v1/completions", false, nil, "dup-1")))
	require.NoError(t, second.Send(bodyChunk(completionsBody(prompt(11, 20, "dup"), false), true)))
	resp, err := second.Recv()
	require.NoError(t, err)
	require.EqualValues(t, http.StatusConflict, resp.GetImmediateResponse().GetStatus().GetCode())
	require.NoError(t, first.CloseSend())
	h.idle()
}

// An x-request-id the router's request table refuses (over
// tokenload.MaxRequestIDBytes) is the client's mistake: a 400 counted as a
// bad request, as the gateway answers it, not a 503 for want of endpoints.
func TestProcessOverlongRequestIDIs400(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	id := strings.Repeat("r", tokenload.MaxRequestIDBytes+1)
	require.NoError(t, st.Send(envoyHeadersID("/v1/completions", false, nil, id)))
	require.NoError(t, st.Send(bodyChunk(completionsBody(prompt(11, 20, "long-id"), false), true)))
	resp, err := st.Recv()
	require.NoError(t, err)
	require.EqualValues(t, http.StatusBadRequest, resp.GetImmediateResponse().GetStatus().GetCode())
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": resultBadRequest}))
	require.Equal(t, 0.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": resultNoEndpoint}))
	require.NoError(t, st.CloseSend())
	h.idle()
}

// A request to an inference route with a trailing slash is routed as the
// API's request and reaches the engine by the API's own path (its query
// kept): Envoy forwards the :path as it came otherwise, and vLLM answers
// "/v1/completions/" with a 307 to the address in its Host header, the
// engine's own, which the client would follow past the gateway. A path
// without one is left alone.
func TestProcessTrailingSlashPathGoesToTheEngineByItsAPIsPath(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	for _, c := range []struct{ in, want string }{
		{"/v1/completions/", "/v1/completions"},
		{"/v1/chat/completions//?api-version=1", "/v1/chat/completions?api-version=1"},
		{"/v1/completions", ""},
		{"/v1/completions?x=1", ""},
	} {
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(envoyHeaders(c.in, false, nil)))
		require.NoError(t, st.Send(bodyChunk(completionsBody(prompt(40, 20, c.in), false), true)))
		hr, err := st.Recv()
		require.NoError(t, err)
		mut := hr.GetRequestHeaders().GetResponse().GetHeaderMutation()
		require.NotNil(t, mut, "%s: routed (got %T)", c.in, hr.Response)
		require.Equal(t, h.engines[0].id, setHeader(mut, DefaultDestinationHeader), c.in)
		require.Equal(t, c.want, setHeader(mut, ":path"), c.in)
		_, _ = drain(t, st)
		h.idle()
	}
	require.Equal(t, 4.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": resultRouted}))

	// The model listing, passed through round robin, likewise.
	for _, c := range []struct{ in, want string }{{"/v1/models/", "/v1/models"}, {"/v1/models", ""}} {
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(envoyHeaders(c.in, true, nil)))
		hr, err := st.Recv()
		require.NoError(t, err)
		mut := hr.GetRequestHeaders().GetResponse().GetHeaderMutation()
		require.Equal(t, h.engines[0].id, setHeader(mut, DefaultDestinationHeader), c.in)
		require.Equal(t, c.want, setHeader(mut, ":path"), c.in)
		require.NoError(t, st.CloseSend())
	}
	require.Equal(t, 2.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": resultPassthrough}))
}

// utf16LE and utf32BE encode s, the latter behind its byte order mark.
func utf16LE(s string) string {
	var out []byte
	for _, u := range utf16.Encode([]rune(s)) {
		out = append(out, byte(u), byte(u>>8))
	}
	return string(out)
}

func utf32BE(s string) string {
	out := []byte{0, 0, 0xFE, 0xFF}
	for _, r := range s {
		out = append(out, byte(r>>24), byte(r>>16), byte(r>>8), byte(r))
	}
	return string(out)
}

// A UTF-16 or UTF-32 body, with or without a byte order mark, is routed as
// the UTF-8 JSON it encodes: vLLM (FastAPI's request.json(), Python's
// json.loads on the body's bytes, which detects either encoding) serves
// it, and the picker answered it 400. The engine gets the UTF-8 body, its
// content-length to match. A body that is not text in its encoding (an
// unpaired surrogate) is answered 400 naming the encoding, and counted.
func TestProcessUTF16Or32BodyIsRoutedAsTheEngineReadsIt(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	body := completionsBody(prompt(7, 20, "wide 😀"), false)
	for i, wide := range []string{utf16LE(body), utf32BE(body)} {
		st, err := h.client.Process(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
		require.NoError(t, st.Send(bodyChunk(wide[:3], false))) // a code unit split across chunks
		require.NoError(t, st.Send(bodyChunk(wide[3:], true)))
		hr, err := st.Recv()
		require.NoError(t, err)
		require.Nil(t, hr.GetImmediateResponse(), "not refused: %v", hr.GetImmediateResponse())
		mut := hr.GetRequestHeaders().GetResponse().GetHeaderMutation()
		require.Equal(t, h.engines[0].id, setHeader(mut, DefaultDestinationHeader))
		require.Equal(t, strconv.Itoa(len(body)), setHeader(mut, "content-length"))
		br, err := st.Recv()
		require.NoError(t, err)
		require.Equal(t, body, string(br.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()))
		require.NoError(t, st.Send(respHeaders(h.engines[0].id, true)))
		_, err = st.Recv()
		require.NoError(t, err)
		h.idle()
		require.Equal(t, float64(i+1), h.counter("kvroute_extproc_requests_total", map[string]string{"result": "routed"}))
	}

	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk(utf16LE(`{"model":"m","prompt":"`)+"\x00\xd8"+utf16LE(`"}`), true)))
	resp, err := st.Recv()
	require.NoError(t, err)
	require.EqualValues(t, http.StatusBadRequest, resp.GetImmediateResponse().GetStatus().GetCode())
	require.Contains(t, string(resp.GetImmediateResponse().GetBody()), "UTF-16LE")
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": resultBadRequest}))
}

// A body that starts with a UTF-8 byte order mark is routed as the same
// body without it: vLLM (FastAPI's request.json(), Python's json.loads on
// the body's bytes) decodes it as UTF-8-sig and serves it, so the picker
// must not answer it 400. The engine gets the body without the mark, its
// content-length to match; a second mark is still not JSON, as for vLLM.
func TestProcessBodyWithUTF8BOMIsRoutedAsTheEngineReadsIt(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, Config{}, engineOpts{})
	defer h.close()
	body := completionsBody(prompt(7, 20, "bom"), false)
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk("\xef\xbb", false))) // the mark split across chunks
	require.NoError(t, st.Send(bodyChunk("\xbf"+body, true)))
	hr, err := st.Recv()
	require.NoError(t, err)
	require.Nil(t, hr.GetImmediateResponse(), "not refused: %v", hr.GetImmediateResponse())
	mut := hr.GetRequestHeaders().GetResponse().GetHeaderMutation()
	require.Equal(t, h.engines[0].id, setHeader(mut, DefaultDestinationHeader))
	require.Equal(t, strconv.Itoa(len(body)), setHeader(mut, "content-length"))
	br, err := st.Recv()
	require.NoError(t, err)
	require.Equal(t, body, string(br.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()))
	require.NoError(t, st.Send(respHeaders(h.engines[0].id, true)))
	_, err = st.Recv()
	require.NoError(t, err)
	h.idle()
	require.Equal(t, 1.0, h.counter("kvroute_extproc_requests_total", map[string]string{"result": "routed"}))

	st, err = h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk("\xef\xbb\xbf\xef\xbb\xbf"+body, true)))
	resp, err := st.Recv()
	require.NoError(t, err)
	require.EqualValues(t, http.StatusBadRequest, resp.GetImmediateResponse().GetStatus().GetCode())
	h.idle()
}
