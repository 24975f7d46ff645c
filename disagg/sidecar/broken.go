package sidecar

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/kvroute/kvroute/internal/upstreamfail"
)

// watchBody is the proxy's ModifyResponse: it wraps the decoder's response
// body so that a body which breaks off after the header is counted
// (brokenBody). The proxy then aborts the client's response
// (http.ErrAbortHandler), so that the client does not take a cut body for
// a whole one.
func (h *Handler) watchBody(res *http.Response) error {
	res.Body = &brokenBody{ReadCloser: res.Body, h: h, ctx: res.Request.Context(), path: res.Request.URL.Path,
		id: res.Request.Header.Get(RequestIDHeader)}
	return nil
}

// brokenBody is a decoder response body whose first read error other than
// the end of the body, while the client is still there, is counted in
// kvroute_sidecar_refused_requests_total{reason="decoder_broken"} and
// logged with its kind (upstreamfail.Classify). Only the proxy's goroutine
// reads it.
type brokenBody struct {
	io.ReadCloser
	h        *Handler
	ctx      context.Context // the client's request's
	path, id string
	counted  bool
}

// Read reads the decoder's body, counting the first time it breaks off.
func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && !b.counted && b.ctx.Err() == nil {
		b.counted = true
		k := upstreamfail.Classify(err)
		b.h.x.lg.WarnContext(b.ctx, "decoder response broke off", "kind", k.String(), "err", err, "path", b.path,
			"request_id", b.id)
		b.h.refused.WithLabelValues(refusedDecoderBroken).Inc()
	}
	return n, err
}
