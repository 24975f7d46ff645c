package extproc

import (
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/usage"
)

func (st *streamState) responseHeaders(req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) error {
	c := st.srv.cfg
	served, ok, bad := servedEndpoint(req.GetMetadataContext(), c.MetadataNamespace, c.ServedKey)
	if bad != "" {
		// Read as no report: the pick keeps the request's load.
		st.srv.met.invalidServed.Inc()
		st.srv.log.Debug("extproc: served endpoint metadata is malformed", "namespace", c.MetadataNamespace, "key", c.ServedKey, "reason", bad, "endpoint", st.endpoint)
	}
	st.served = served
	endpoint := st.endpoint
	if ok && st.endpoint != "" && served != st.endpoint {
		// Envoy fell back to another endpoint than the pick (a retry down
		// the list): the request's load moves to the fallback that served.
		st.srv.met.servedMismatch.Inc()
		if st.decision.Served(served) {
			st.moved = served
			st.srv.met.servedFallback.Inc()
			st.srv.notify(st.endpoint)
			st.srv.notify(served)
		}
		if slices.Contains(st.list, served) {
			endpoint = served
		}
	}
	set := make([]*corev3.HeaderValueOption, 0, 3)
	if endpoint != "" {
		set = append(set, header(EndpointHeader, endpoint))
	}
	if c.ConformanceTestHooks {
		if !ok {
			served = servedMissing
		}
		set = append(set, header(ConformanceServedHeader, served))
	}
	if st.decision != nil && st.decision.RenderErr != nil {
		set = append(set, header(RenderFallbackHeader, "true"))
	}
	if a := st.srv.session; a != nil && st.decision != nil && endpoint != "" {
		if endpoint != st.endpoint {
			a.Served(&st.req, endpoint) // the session's next turn goes where its blocks are
		}
		if c, ok := a.ResponseCookie(&st.req, endpoint); ok {
			// Beside the engine's cookies. Envoy's ext_proc filter reads
			// only the deprecated append, false when unset (it would
			// replace them); append_action says the same to those that
			// read it.
			h := header("set-cookie", c)
			h.Append = wrapperspb.Bool(true) //lint:ignore SA1019 the field Envoy's ext_proc reads
			h.AppendAction = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
			set = append(set, h)
		}
	}
	if err := st.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
			HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: set},
		}},
	}}); err != nil {
		return err
	}
	if st.scanning {
		// Response headers again (Envoy sends them once): the read begun
		// under the first gives its buffer back before another begins.
		st.scanning = false
		st.scan.Release()
	}
	if c.ObserveCachedTokens && st.decision != nil && len(st.decision.Roles) == 0 {
		// A split request's decoder reports the transferred prompt as
		// cached: no measure of what the index predicted for it.
		if code, sse := responseMeta(h.GetHeaders()); code/100 == 2 {
			st.scan = usage.Scanner{SSE: sse, Budget: &st.srv.bodies}
			st.scanning = true
		}
	}
	if h.GetEndOfStream() {
		st.release()
	}
	return nil
}

func (st *streamState) responseBody(b *extprocv3.HttpBody) error {
	if !st.firstOut {
		st.firstOut = true
		if st.decision != nil {
			st.decision.FirstChunk()
			st.srv.notify(st.accountedAt())
		}
	}
	if st.scanning {
		st.scan.Write(b.GetBody())
	}
	if b.GetEndOfStream() {
		st.release()
	}
	resp := &extprocv3.CommonResponse{}
	if !st.respPlain {
		resp.BodyMutation = streamedBody(b.GetBody(), b.GetEndOfStream())
	}
	return st.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocv3.BodyResponse{Response: resp},
	}})
}

// release ends the request's load accounting on the response path, with
// the cached tokens the response reported when it was read for them.
func (st *streamState) release() {
	var info kvroute.DoneInfo
	if st.scanning {
		st.scanning = false
		cached, result := st.scan.Result()
		st.srv.met.usage[result].Inc()
		if result == usage.Observed {
			info.CachedTokens, info.HasCachedTokens = cached, true
			st.observed, st.actual = true, cached
		}
	}
	if st.decision != nil && !st.done {
		st.done = true
		st.decision.Done(info)
		st.srv.notify(st.accountedAt())
	}
}

// accountedAt is the endpoint that holds the request's load, the one the
// admission is told of when it moves: the fallback that served the request
// once Decision.Served moved the load there, else the pick. Naming the pick
// after the move would drop a claim another request's release took on it.
func (st *streamState) accountedAt() string {
	if st.moved != "" {
		return st.moved
	}
	return st.decision.Endpoint.ID
}

// responseMeta reads a response's status code (0 when absent or malformed)
// and whether its body is a server-sent event stream.
func responseMeta(m *corev3.HeaderMap) (code int, sse bool) {
	for _, hv := range m.GetHeaders() {
		v := hv.GetValue()
		if len(hv.GetRawValue()) > 0 {
			v = string(hv.GetRawValue())
		}
		switch strings.ToLower(hv.GetKey()) {
		case ":status":
			if n, err := strconv.Atoi(v); err == nil {
				code = n
			}
		case "content-type":
			sse = strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "text/event-stream")
		}
	}
	return code, sse
}
