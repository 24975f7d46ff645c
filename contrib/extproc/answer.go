package extproc

import (
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/kvroute/kvroute/disagg"
)

// sidecarHeaders are the request headers llm-d's routing sidecar acts on
// besides disagg.HeaderPrefiller, which the picker never sets: the encoder
// endpoints, the endpoint to pull the prompt's KV blocks from, and the
// data-parallel rank to forward to, under their pre-convention names and
// llm-d's current ones (x-llm-d-..., which its sidecar reads when the
// former is absent). llm-d's picker clears a client's own values under both
// names; passed on, they would steer the decode pod's sidecar past the
// pick.
var sidecarHeaders = []string{"x-encoder-hosts-ports", "x-kv-cache-source-host-port", "x-data-parallel-host-port",
	"x-llm-d-encoder-hosts-ports", "x-llm-d-kv-cache-source-host-port"}

// prefillerHeaders are the names of the prefill endpoint the picker sets
// on a split request and removes from any other: the pre-convention one and
// llm-d's current one.
var prefillerHeaders = [...]string{disagg.HeaderPrefiller, disagg.HeaderPrefillerLLMD}

// answerRequest sends the request-headers response naming the endpoint
// followed by its fallbacks (list) and, when the request has a body, the
// body back as streamed mutations of at most maxBodyChunk bytes. A prefill endpoint (a disaggregated
// request) is named in disagg.HeaderPrefiller, as llm-d's endpoint picker
// sets it for the decode pod's sidecar; without one a client's own value
// of that header is removed, as are a client's sidecarHeaders.
func (st *streamState) answerRequest(list []string, prefill string, body []byte, fallback bool) error {
	st.endpoint, st.list = list[0], list
	c := st.srv.cfg
	endpoint := strings.Join(list, ",")
	set := append(make([]*corev3.HeaderValueOption, 0, 4), header(c.DestinationHeader, endpoint))
	if st.rewrite != "" {
		h := header(":path", st.rewrite)
		h.AppendAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		set = append(set, h)
	}
	if body != nil {
		set = append(set, header("content-length", strconv.Itoa(len(body))))
	}
	if fallback {
		set = append(set, header(RenderFallbackHeader, "true"))
	}
	mut := &extprocv3.HeaderMutation{SetHeaders: set}
	switch {
	case prefill != "":
		// Under both names, as llm-d's picker writes it: every sidecar
		// reads one of them.
		for _, name := range prefillerHeaders {
			h := header(name, prefill)
			h.AppendAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD // never beside a client's value
			mut.SetHeaders = append(mut.SetHeaders, h)
		}
	default:
		for _, name := range prefillerHeaders {
			if len(st.header.Values(name)) > 0 {
				mut.RemoveHeaders = append(mut.RemoveHeaders, name)
			}
		}
	}
	for _, k := range sidecarHeaders {
		if len(st.header.Values(k)) > 0 {
			mut.RemoveHeaders = append(mut.RemoveHeaders, k)
		}
	}
	resp := &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
			Response: &extprocv3.CommonResponse{
				ClearRouteCache: true,
				HeaderMutation:  mut,
			},
		}},
		DynamicMetadata: destinationMetadata(c.MetadataNamespace, c.DestinationHeader, endpoint),
	}
	if err := st.send(resp); err != nil {
		return err
	}
	if body == nil {
		return nil
	}
	// The body goes back in chunks of at most maxBodyChunk bytes, the
	// last ending the stream (an empty body is one empty chunk) when a body
	// chunk ended it: when trailers did, Envoy sent no body end of stream
	// and the trailers' answer completes the request.
	for {
		n := min(len(body), maxBodyChunk)
		if err := st.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
				BodyMutation: streamedBody(body[:n], n == len(body) && !st.trailers),
			}},
		}}); err != nil || n == len(body) {
			return err
		}
		body = body[n:]
	}
}
