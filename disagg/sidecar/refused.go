package sidecar

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/upstreamfail"
)

// Why a Handler answered a request with an error of its own, or dropped it,
// instead of passing it on: the reason label values of
// kvroute_sidecar_refused_requests_total, a fixed set.
const (
	// refusedTooLarge: the body is over Config.MaxBodyBytes (413).
	refusedTooLarge = "body_too_large"
	// refusedBadBody: the body could not be read, or a request to split
	// (or one on a route vLLM reads kv_transfer_params from, plainBody) is
	// not one JSON object (400).
	refusedBadBody = "bad_body"
	// refusedBodyTimeout: the body did not arrive within
	// Config.BodyReadTimeout (408).
	refusedBodyTimeout = "body_timeout"
	// refusedBodyBudget: the Handler held its Config.MaxBodyBytesInFlight
	// of bodies already (503).
	refusedBodyBudget = "body_budget"
	// refusedClientGone: the client went away before it was answered.
	refusedClientGone = "client_gone"
	// refusedClientStalled: the client took nothing of its response for
	// Config.ResponseWriteTimeout; the response was cut.
	refusedClientStalled = "client_stalled"
	// refusedDecoderUnreachable: the local decoder could not be connected
	// to (502).
	refusedDecoderUnreachable = "decoder_unreachable"
	// refusedDecoderTimeout: a deadline passed before the decoder connected
	// or sent its response header (502).
	refusedDecoderTimeout = "decoder_timeout"
	// refusedDecoderClosed: the decoder reset or closed the connection
	// before its response header (502).
	refusedDecoderClosed = "decoder_closed"
	// refusedDecoderError: the request to the decoder failed before its
	// response header in another way, such as a malformed answer (502).
	refusedDecoderError = "decoder_error"
	// refusedDecoderBroken: the decoder's response broke off after its
	// header (the connection closed, a deadline passed, a malformed
	// body); the client's response was cut (broken.go).
	refusedDecoderBroken = "decoder_broken"
)

// refusedReasons lists every reason, each exported at zero from the start.
var refusedReasons = []string{refusedTooLarge, refusedBadBody, refusedBodyTimeout, refusedBodyBudget, refusedClientGone,
	refusedClientStalled, refusedDecoderUnreachable, refusedDecoderTimeout, refusedDecoderClosed, refusedDecoderError,
	refusedDecoderBroken}

// decoderReasons is the reason of each kind of failed request to the
// decoder.
var decoderReasons = [...]string{
	upstreamfail.Other:       refusedDecoderError,
	upstreamfail.Unreachable: refusedDecoderUnreachable,
	upstreamfail.Timeout:     refusedDecoderTimeout,
	upstreamfail.Closed:      refusedDecoderClosed,
}

// newRefused builds kvroute_sidecar_refused_requests_total and registers it
// on reg (nil registers nothing).
func newRefused(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_sidecar_refused_requests_total",
		Help: "Requests the P/D sidecar answered with an error of its own or dropped, by reason: body_too_large (413), bad_body (400), body_timeout (408, the body did not arrive in time), body_budget (503, the sidecar held its limit of body bytes in flight), client_gone, client_stalled (the client took nothing of its response for the response write timeout; the response was cut), and the 502s by the kind of the decoder's failure: decoder_unreachable, decoder_timeout, decoder_closed, decoder_error; decoder_broken, the decoder's response broke off after its header and the client's response was cut.",
	}, []string{"reason"})
	for _, r := range refusedReasons {
		c.WithLabelValues(r)
	}
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil, errors.New("sidecar: metrics already registered on this registerer (one Handler per registry)")
		}
		return nil, err
	}
	return c, nil
}
