package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/internal/stallwrite"
	"github.com/kvroute/kvroute/internal/upstreamfail"
	"github.com/kvroute/kvroute/internal/usage"
	"github.com/kvroute/kvroute/render"
)

// Debugging headers set on every proxied response.
const (
	// HeaderEndpoint carries the chosen endpoint's ID.
	HeaderEndpoint = "X-Kvroute-Endpoint"
	// HeaderPromptTokens carries the router's prompt token count (0 when the
	// request could not be tokenized).
	HeaderPromptTokens = "X-Kvroute-Prompt-Tokens"
	// HeaderCachedTokens carries the prompt tokens the router predicted
	// cached on the chosen endpoint.
	HeaderCachedTokens = "X-Kvroute-Cached-Tokens"
	// HeaderPrefillEndpoint carries the prefill endpoint's ID of a
	// disaggregated request (ServerConfig.Disagg); absent when the decode
	// endpoint prefilled locally.
	HeaderPrefillEndpoint = "X-Kvroute-Prefill-Endpoint"
)

// headerPrefiller and headerPrefillerLLMD are disagg.HeaderPrefiller and
// disagg.HeaderPrefillerLLMD in canonical form.
var (
	headerPrefiller     = http.CanonicalHeaderKey(disagg.HeaderPrefiller)
	headerPrefillerLLMD = http.CanonicalHeaderKey(disagg.HeaderPrefillerLLMD)
)

// sidecarHeaders are the request headers llm-d's routing sidecar acts on
// besides disagg.HeaderPrefiller, in canonical form: the encoder endpoints,
// the endpoint to pull the prompt's KV blocks from and the data-parallel
// rank to forward to, and llm-d's current names of the encoders and the KV
// source (x-llm-d-..., which its sidecar reads when the pre-convention name
// is absent). The gateway never sets them, and llm-d's picker clears a
// client's own values under both names: passed on, they would steer the
// decode pod's sidecar past the pick.
var sidecarHeaders = [...]string{
	http.CanonicalHeaderKey("x-encoder-hosts-ports"),
	http.CanonicalHeaderKey("x-kv-cache-source-host-port"),
	http.CanonicalHeaderKey("x-data-parallel-host-port"),
	http.CanonicalHeaderKey("x-llm-d-encoder-hosts-ports"),
	http.CanonicalHeaderKey("x-llm-d-kv-cache-source-host-port"),
}

// removeSidecarHeaders deletes from h the client's values of the
// headers the decode pod's routing sidecar acts on (the prefill endpoint
// under both names, and sidecarHeaders), and reports whether it held any.
func removeSidecarHeaders(h http.Header) bool {
	n := len(h)
	delete(h, headerPrefiller)
	delete(h, headerPrefillerLLMD)
	for _, k := range sidecarHeaders {
		delete(h, k)
	}
	return len(h) < n
}

// hopHeaders are the hop-by-hop headers of RFC 9110 §7.6.1, which a proxy
// must not forward.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// copyBufs are the response copy buffers. 32 KiB holds many SSE events, and a
// read returns whatever has arrived, so a small event is not held back.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// forward sends r (with body) to d's endpoint and copies the response to w,
// flushing after every read. It calls d.FirstChunk on the first response
// bytes, records first-chunk latency on am (nil: none), and returns the
// request's result and its error (nil on success).
// With Config.ObserveCachedTokens and a record (inference requests), the
// response's usage is read on the way and its cached tokens handed to
// d.Observe and rec.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, body []byte, d *kvroute.Decision, start time.Time, am *apiMetrics, rec *DecisionRecord, routed *kvroute.Request) (Result, error) {
	api := apiOf(r)
	hdr := outboundHeader(r)
	// The prefill endpoint is the router's to name: a client's value would
	// send the decode pod's sidecar wherever the client likes. So would the
	// other headers the sidecar acts on, which nobody here sets. A request
	// that carried any is counted.
	if removeSidecarHeaders(hdr) {
		h.met.sidecarRemoved.Inc()
	}
	propagator.Inject(r.Context(), propagation.HeaderCarrier(hdr)) // this hop's span, or the client's context as it came
	// In exchange mode, fallback is why the prefill step was given up.
	var fallback string
	split := len(d.Roles) > 0
	var orig []byte    // the client's body without transfer parameters, for a retry with a local prefill
	exchanged := false // body carries the prefiller's transfer parameters
	switch {
	case split && h.exchanger != nil && body != nil:
		var (
			res  Result
			err  error
			held int64
		)
		if body, orig, fallback, held, res, err = h.exchange(w, r, hdr, body, d); err != nil {
			return res, err
		}
		defer h.budget.Release(held) // after the response, as the body's
		split = fallback == "" && sidecar.SplitPath(r.URL.Path) && r.Method == http.MethodPost
		exchanged = split
	case split:
		// Under both names, as llm-d's router writes it: every sidecar
		// reads one of them. The value is where the prefill endpoint's
		// requests go (its Address's host:port), which its ID need not be.
		hp := disagg.PrefillerHostPort(d.Roles[0].Endpoint)
		hdr[headerPrefiller] = []string{hp}
		hdr[headerPrefillerLLMD] = []string{hp}
	}
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	var (
		out *http.Request
		err error
	)
	if d.Endpoint.Address == "" {
		// The common case, an endpoint named by host:port: the URL is built,
		// not formatted and parsed again.
		if out, err = http.NewRequestWithContext(r.Context(), r.Method, "", rd); err == nil {
			out.URL = &url.URL{Scheme: "http", Host: d.Endpoint.ID, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
			out.Host = d.Endpoint.ID
		}
	} else {
		target := d.Endpoint.URL() + r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		out, err = http.NewRequestWithContext(r.Context(), r.Method, target, rd)
	}
	if err != nil {
		return h.upstreamFailed(w, r, api, d, upstreamfail.Other, err), err
	}
	out.Header = hdr
	out.ContentLength = int64(len(body))

	resp, err := h.transport.RoundTrip(out)
	if err == nil && exchanged && resp.StatusCode/100 == 5 {
		resp, err = h.retryLocal(out, resp, orig)
		fallback = FallbackDecodeFailed
	}
	if err != nil {
		if r.Context().Err() != nil {
			return ResultClientAbort, context.Cause(r.Context())
		}
		return h.upstreamFailed(w, r, api, d, upstreamfail.Classify(err), err), err
	}
	defer resp.Body.Close()

	hdr = w.Header()
	h.cors.unset(hdr) // the engine's CORS headers, not the gateway's policy
	for k, vs := range resp.Header {
		hdr[k] = vs
	}
	removeHopHeaders(hdr)
	// The three debugging values share one backing array (one allocation,
	// not three); the keys are canonical already.
	dv := [...]string{d.Endpoint.ID, strconv.Itoa(d.PromptTokens), strconv.Itoa(d.CachedTokens)}
	vals := dv[:]
	hdr[HeaderEndpoint] = vals[0:1:1]
	hdr[HeaderPromptTokens] = vals[1:2:2]
	hdr[HeaderCachedTokens] = vals[2:3:3]
	if split {
		hdr[HeaderPrefillEndpoint] = []string{d.Roles[0].Endpoint.ID}
	}
	if fallback != "" {
		hdr[HeaderPrefillFallback] = []string{fallback}
	}
	if routed != nil {
		// Session affinity: a request without a session key (or whose
		// cookie names another endpoint) gets llm-d's session cookie naming
		// the endpoint that answered, beside any cookie the engine set.
		if c, ok := h.session.ResponseCookie(routed, d.Endpoint.ID); ok { // nil-safe
			hdr["Set-Cookie"] = append(hdr["Set-Cookie"], c)
		}
	}
	// Every write may wait ResponseWriteTimeout for the client to take it
	// (see Config.ResponseWriteTimeout).
	sw := stallwrite.Start(w, h.cfg.ResponseWriteTimeout)
	defer sw.Stop()
	w.WriteHeader(resp.StatusCode)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_ = sw.Flush() // the client sees the stream open at once
	}

	var us *usage.Scanner
	// A split request's decoder reports the transferred prompt as cached:
	// no measure of what the index predicted for it, so it does not feed
	// the accuracy loop.
	if h.cfg.ObserveCachedTokens && rec != nil && resp.StatusCode/100 == 2 && !split {
		us = &usage.Scanner{SSE: strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"), Budget: &h.budget}
		defer us.Release() // a response cut short gives its buffer back too
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	first := true
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if first {
				first = false
				d.FirstChunk()
				h.notify(d)
				if am != nil {
					am.firstChunk.Observe(h.now().Sub(start).Seconds())
				}
			}
			if us != nil {
				us.Write(buf[:n])
			}
			if _, werr := sw.Write(buf[:n]); werr != nil {
				return writeResult(werr), werr
			}
			if ferr := sw.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				return writeResult(ferr), ferr
			}
		}
		switch {
		case rerr == io.EOF:
			if resp.StatusCode/100 != 2 {
				return ResultUpstreamStatus, fmt.Errorf("endpoint %s answered %s", d.Endpoint.ID, resp.Status)
			}
			if us != nil {
				h.finish(d, us, rec)
			}
			return ResultSuccess, nil
		case rerr != nil:
			if r.Context().Err() != nil {
				return ResultClientAbort, context.Cause(r.Context())
			}
			// The result stays upstream_broken whatever the kind, as
			// dashboards select it; the kind splits it in its own counter
			// (counted for inference requests only, as results are).
			k := upstreamfail.Classify(rerr)
			if am != nil {
				h.met.broken[k].Inc()
			}
			h.log.WarnContext(r.Context(), "upstream response broke off", "endpoint", d.Endpoint.ID,
				"kind", k.String(), "path", r.URL.Path, "request_id", r.Header.Get(headerRequestID), "err", rerr)
			return ResultUpstreamBroken, rerr
		}
	}
}

// writeResult is the result of a response whose write to the client
// failed: the client stalled past Config.ResponseWriteTimeout, or went away.
func writeResult(err error) Result {
	if stallwrite.Stalled(err) {
		return ResultClientStalled
	}
	return ResultClientAbort
}

// outboundHeader copies the inbound header without hop-by-hop fields and adds
// the X-Forwarded-* fields.
func outboundHeader(r *http.Request) http.Header {
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	removeHopHeaders(h)
	delete(h, "Content-Length")
	delete(h, "Expect") // the gateway has read the body already
	// The X-Forwarded-* values share one backing array (one allocation, not
	// three); the keys are canonical, as net/http's server stores them.
	vals := make([]string, 0, 3)
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := h["X-Forwarded-For"]; len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		vals = append(vals, ip)
		h["X-Forwarded-For"] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if h.Get("X-Forwarded-Host") == "" && r.Host != "" {
		vals = append(vals, r.Host)
		h["X-Forwarded-Host"] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if h.Get("X-Forwarded-Proto") == "" {
		proto := "http"
		if r.TLS != nil {
			proto = "https"
		}
		vals = append(vals, proto)
		h["X-Forwarded-Proto"] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	return h
}

// apiOf is the API of r's path (completions for paths of none).
func apiOf(r *http.Request) render.API {
	if a, ok := render.APIForPath(r.URL.Path); ok {
		return a
	}
	if r.URL.Path == countTokensPath {
		return render.APIMessages // Anthropic's error shape
	}
	return render.APICompletions
}

// removeHopHeaders deletes the hop-by-hop headers and those the Connection
// header names.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k) // canonical already
	}
}
