package envoysim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// DefaultChunkBytes is the size of the request and response body chunks the
// proxy sends to the picker: Envoy forwards bodies as they arrive, in pieces
// of about this size.
const DefaultChunkBytes = 16 << 10

// Config configures a Proxy.
type Config struct {
	// DestinationHeader is the header the picker names the endpoint in
	// (default x-gateway-destination-endpoint).
	DestinationHeader string
	// MetadataNamespace and ServedKey name where the served endpoint is
	// reported (default envoy.lb / x-gateway-destination-endpoint-served).
	MetadataNamespace string
	ServedKey         string
	// ChunkBytes is the body chunk size (default DefaultChunkBytes).
	ChunkBytes int
	// Subset, when set, returns the subset hint to send for a request (a list
	// of "ip:port"); nil sends none.
	Subset func(r *http.Request) []string
	// Retries is how many more endpoints of the picker's list the proxy
	// tries after the first fails (its connection fails or it answers 5xx),
	// as Envoy's retry policy does with the endpoint-picker protocol's
	// fallbacks. 0 (or a negative value) tries the first only.
	Retries int
	// FailOpen, when not empty, is the pool's endpoints ("ip:port") a
	// request goes to, in turn, when the picker is unavailable or fails
	// (Envoy's failure_mode_allow); empty answers such a request 500.
	FailOpen []string
}

// Proxy is the Envoy-behaving reverse proxy. It is an http.Handler.
type Proxy struct {
	cfg    Config
	picker extprocv3.ExternalProcessorClient
	client *http.Client
	turn   atomic.Uint64 // the FailOpen rotation
}

// New returns a Proxy that asks picker for every request's endpoint and
// forwards with client (nil: a client with its own transport).
func New(cfg Config, picker extprocv3.ExternalProcessorClient, client *http.Client) *Proxy {
	if cfg.DestinationHeader == "" {
		cfg.DestinationHeader = "x-gateway-destination-endpoint"
	}
	if cfg.MetadataNamespace == "" {
		cfg.MetadataNamespace = "envoy.lb"
	}
	if cfg.ServedKey == "" {
		cfg.ServedKey = "x-gateway-destination-endpoint-served"
	}
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = DefaultChunkBytes
	}
	cfg.Retries = max(cfg.Retries, 0) // a negative count would cut the list below its first endpoint
	if client == nil {
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	}
	return &Proxy{cfg: cfg, picker: picker, client: client}
}

// ServeHTTP proxies one request through the picker.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // a client that goes away resets the ext_proc stream, as Envoy does
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	stream, err := p.picker.Process(ctx)
	if err != nil {
		p.pickerFailed(w, r, body, err)
		return
	}
	dests, fwdBody, err := p.requestPhase(w, r, stream, body)
	if err != nil {
		cancel() // reset the failed stream
		p.pickerFailed(w, r, body, err)
		return
	}
	if dests == nil {
		return // answered
	}
	p.responsePhase(ctx, w, r, stream, dests, fwdBody)
}

// pickerFailed answers a request whose picker could not be reached or
// failed: forwarded without it to the next FailOpen endpoint, or 500.
func (p *Proxy) pickerFailed(w http.ResponseWriter, r *http.Request, body []byte, err error) {
	if len(p.cfg.FailOpen) == 0 {
		http.Error(w, "ext_proc: "+err.Error(), http.StatusInternalServerError)
		return
	}
	dest := p.cfg.FailOpen[int(p.turn.Add(1)-1)%len(p.cfg.FailOpen)]
	resp, err := p.forward(r.Context(), r, dest, body)
	if err != nil {
		http.Error(w, "upstream: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// forward sends the request to dest.
func (p *Proxy) forward(ctx context.Context, r *http.Request, dest string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	up, err := http.NewRequestWithContext(ctx, r.Method, "http://"+dest+r.URL.RequestURI(), rd)
	if err != nil {
		return nil, err
	}
	up.Header = r.Header.Clone()
	up.Header.Del(p.cfg.DestinationHeader)
	return p.client.Do(up)
}

// requestPhase sends the request to the picker and returns the destinations
// it named (the pick, then its fallbacks) and the (possibly mutated) body.
// It returns nil destinations when the picker answered the client itself or
// named no destination (the client is answered), and an error when the
// stream failed (the picker is unavailable or broke).
func (p *Proxy) requestPhase(w http.ResponseWriter, r *http.Request, stream extprocv3.ExternalProcessor_ProcessClient, body []byte) ([]string, []byte, error) {
	first := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: requestHeaderMap(r), EndOfStream: len(body) == 0},
	}}
	if p.cfg.Subset != nil {
		if ids := p.cfg.Subset(r); ids != nil {
			vals := make([]any, len(ids))
			for i, id := range ids {
				vals[i] = id
			}
			inner, _ := structpb.NewStruct(map[string]any{"x-gateway-destination-endpoint-subset": vals})
			first.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.lb.subset_hint": inner}}
		}
	}
	if err := stream.Send(first); err != nil {
		return nil, nil, err
	}
	for off := 0; off < len(body); off += p.cfg.ChunkBytes {
		end := min(off+p.cfg.ChunkBytes, len(body))
		if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: body[off:end], EndOfStream: end == len(body)},
		}}); err != nil {
			break // the picker may have answered already (413); read its answer below
		}
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, nil, err
	}
	if ir := resp.GetImmediateResponse(); ir != nil {
		writeImmediate(w, ir)
		return nil, nil, nil
	}
	hr := resp.GetRequestHeaders()
	if hr == nil {
		return nil, nil, fmt.Errorf("unexpected answer %T to request headers", resp.Response)
	}
	removeHeaders(r.Header, hr.GetResponse().GetHeaderMutation())
	for _, h := range hr.GetResponse().GetHeaderMutation().GetSetHeaders() {
		key := strings.ToLower(h.GetHeader().GetKey())
		switch {
		case key == ":path":
			// The upstream request's path, as Envoy's ext_proc filter
			// rewrites it.
			u, err := url.ParseRequestURI(headerValue(h.GetHeader()))
			if err != nil {
				return nil, nil, fmt.Errorf("the picker set an invalid :path: %w", err)
			}
			r.URL.Path, r.URL.RawPath, r.URL.RawQuery = u.Path, u.RawPath, u.RawQuery
		case key != p.cfg.DestinationHeader && key != "content-length":
			setHeader(r.Header, h)
		}
	}
	dest := ""
	for _, h := range hr.GetResponse().GetHeaderMutation().GetSetHeaders() {
		if strings.EqualFold(h.GetHeader().GetKey(), p.cfg.DestinationHeader) {
			dest = headerValue(h.GetHeader())
		}
	}
	if md := resp.GetDynamicMetadata(); dest == "" && md != nil {
		dest = md.GetFields()[p.cfg.MetadataNamespace].GetStructValue().GetFields()[p.cfg.DestinationHeader].GetStringValue()
	}
	var dests []string
	for _, d := range strings.Split(dest, ",") {
		if d = strings.TrimSpace(d); d != "" {
			dests = append(dests, d)
		}
	}
	if len(dests) == 0 {
		http.Error(w, "ext_proc: the picker named no destination", http.StatusServiceUnavailable)
		return nil, nil, nil
	}
	if len(body) == 0 {
		return dests, nil, nil
	}
	var out []byte
	for {
		resp, err := stream.Recv()
		if err != nil {
			return nil, nil, err
		}
		sr := resp.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			return nil, nil, errors.New("expected a streamed request body")
		}
		out = append(out, sr.GetBody()...)
		if sr.GetEndOfStream() {
			return dests, out, nil
		}
	}
}

// upstream sends the request to the first of dests that answers, trying
// the next after a connection failure or a 5xx answer while Retries allow,
// and returns the response and the endpoint that served it.
func (p *Proxy) upstream(ctx context.Context, r *http.Request, dests []string, body []byte) (*http.Response, string, error) {
	var lastErr error
	for k, dest := range dests[:min(len(dests), 1+p.cfg.Retries)] {
		resp, err := p.forward(ctx, r, dest, body)
		last := k == min(len(dests), 1+p.cfg.Retries)-1
		switch {
		case err != nil:
			lastErr = err
			if ctx.Err() != nil {
				return nil, "", err
			}
		case resp.StatusCode >= 500 && !last:
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		default:
			return resp, dest, nil
		}
	}
	return nil, "", lastErr
}

func (p *Proxy) responsePhase(ctx context.Context, w http.ResponseWriter, r *http.Request, stream extprocv3.ExternalProcessor_ProcessClient, dests []string, body []byte) {
	resp, dest, err := p.upstream(ctx, r, dests, body)
	if err != nil {
		// Upstream failure: Envoy resets the ext_proc stream (the deferred
		// cancel) and answers the client itself.
		http.Error(w, "upstream: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer resp.Body.Close()
	served, _ := structpb.NewStruct(map[string]any{p.cfg.ServedKey: dest})
	rh := &extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
			Headers: responseHeaderMap(resp),
		}},
		MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{p.cfg.MetadataNamespace: served}},
	}
	if err := stream.Send(rh); err != nil {
		return
	}
	hresp, err := stream.Recv()
	if err != nil {
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	removeHeaders(w.Header(), hresp.GetResponseHeaders().GetResponse().GetHeaderMutation())
	for _, h := range hresp.GetResponseHeaders().GetResponse().GetHeaderMutation().GetSetHeaders() {
		setHeader(w.Header(), h)
	}
	w.Header().Del("Content-Length") // the body passes through the picker in chunks
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, p.cfg.ChunkBytes)
	for {
		n, rerr := resp.Body.Read(buf)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return // upstream broke or the client went away: Envoy resets the stream (the deferred cancel)
		}
		eos := rerr != nil
		if n == 0 && !eos {
			continue
		}
		if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: append([]byte(nil), buf[:n]...), EndOfStream: eos},
		}}); err != nil {
			return
		}
		br, err := stream.Recv()
		if err != nil {
			return
		}
		if sr := br.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse(); sr != nil {
			if _, err := w.Write(sr.GetBody()); err != nil {
				return // client gone: the deferred cancel resets the stream
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if eos {
			break
		}
	}
	_ = stream.CloseSend()
	for {
		if _, err := stream.Recv(); err != nil {
			return
		}
	}
}

func requestHeaderMap(r *http.Request) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	add := func(k, v string) {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	add(":method", r.Method)
	add(":path", r.URL.RequestURI())
	add(":authority", r.Host)
	add(":scheme", "http")
	for k, vs := range r.Header {
		for _, v := range vs {
			add(strings.ToLower(k), v)
		}
	}
	if r.ContentLength > 0 {
		add("content-length", strconv.FormatInt(r.ContentLength, 10))
	}
	return m
}

func responseHeaderMap(resp *http.Response) *corev3.HeaderMap {
	m := &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte(strconv.Itoa(resp.StatusCode))}}}
	for k, vs := range resp.Header {
		for _, v := range vs {
			m.Headers = append(m.Headers, &corev3.HeaderValue{Key: strings.ToLower(k), RawValue: []byte(v)})
		}
	}
	return m
}

// removeHeaders applies a header mutation's remove_headers as Envoy's
// ext_proc filter does, before its set_headers: pseudo-headers and host are
// not removed.
func removeHeaders(hdr http.Header, m *extprocv3.HeaderMutation) {
	for _, k := range m.GetRemoveHeaders() {
		if strings.HasPrefix(k, ":") || strings.EqualFold(k, "host") {
			continue
		}
		hdr.Del(k)
	}
}

// setHeader applies one set_headers entry of a header mutation as Envoy's
// ext_proc filter does: it reads only the deprecated append, false when
// unset, and appends the value when it is true or replaces the header's
// values otherwise; append_action is not read.
func setHeader(hdr http.Header, o *corev3.HeaderValueOption) {
	key, val := o.GetHeader().GetKey(), headerValue(o.GetHeader())
	//lint:ignore SA1019 the field Envoy's ext_proc reads
	if o.GetAppend().GetValue() {
		hdr.Add(key, val)
		return
	}
	hdr.Set(key, val)
}

func headerValue(h *corev3.HeaderValue) string {
	if len(h.GetRawValue()) > 0 {
		return string(h.GetRawValue())
	}
	return h.GetValue()
}

func writeImmediate(w http.ResponseWriter, ir *extprocv3.ImmediateResponse) {
	for _, h := range ir.GetHeaders().GetSetHeaders() {
		setHeader(w.Header(), h)
	}
	code := int(ir.GetStatus().GetCode())
	if code == 0 {
		code = http.StatusOK
	}
	w.WriteHeader(code)
	_, _ = w.Write(ir.GetBody())
}
