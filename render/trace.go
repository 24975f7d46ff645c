package render

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the render client's spans.
const TracerName = "github.com/kvroute/kvroute/render"

// SpanRender is the span of one render HTTP attempt.
const SpanRender = "render"

// Attributes of the render span.
const (
	AttrEndpoint = attribute.Key("kvroute.render.endpoint")
	AttrRoute    = attribute.Key("kvroute.render.route")
	AttrAttempt  = attribute.Key("kvroute.render.attempt")
	AttrRetry    = attribute.Key("kvroute.render.retry")
	AttrStatus   = attribute.Key("http.response.status_code")
	AttrReason   = attribute.Key("kvroute.render.failure_reason")
	AttrTokens   = attribute.Key("kvroute.render.prompt_tokens")
)

// tracedAttempt is attempt inside a "render" span when the client traces.
func (c *Client) tracedAttempt(ctx context.Context, t *target, r route, body *wireBody, auth string, n int, res *Result, ex *exchange) *Error {
	if c.tracer == nil {
		return c.noteNotEnabled(t, r, body, c.countAttempt(body, c.attempt(ctx, t, r, body, auth, res, ex)))
	}
	ctx, sp := c.tracer.Start(ctx, SpanRender, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		AttrEndpoint.String(t.id), AttrRoute.String(t.urls[r]), AttrAttempt.Int(n), AttrRetry.Bool(n > 1)))
	defer sp.End()
	err := c.noteNotEnabled(t, r, body, c.countAttempt(body, c.attempt(ctx, t, r, body, auth, res, ex)))
	if err != nil {
		if err.Status != 0 {
			sp.SetAttributes(AttrStatus.Int(err.Status))
		}
		sp.SetAttributes(AttrReason.String(string(err.Reason)))
		sp.SetStatus(codes.Error, err.Error())
		return err
	}
	tokens := 0
	for _, p := range res.Prompts {
		tokens += len(p.TokenIDs)
	}
	sp.SetAttributes(AttrTokens.Int(tokens))
	sp.SetStatus(codes.Ok, "")
	return nil
}

// noteNotEnabled passes route r of t over for notEnabledBench, and counts
// it in kvroute_render_not_enabled_total, when err is the bare 404 of a
// renderer without render routes (ErrRenderNotEnabled), and returns err. A
// probe's 404 is the answer the mode discovery asks for: neither.
func (c *Client) noteNotEnabled(t *target, r route, body *wireBody, err *Error) *Error {
	if err != nil && !body.probe && errors.Is(err.Err, ErrRenderNotEnabled) {
		t.st.bench(r, c.now().UnixNano())
		c.metrics.notEnabled.Inc()
	}
	return err
}

// countAttempt counts a failed attempt of body in
// kvroute_render_attempt_failures_total and returns err. A cancelled attempt
// (a hedge loser abandoned, the caller gone) is no failure of the renderer;
// an attempt past its deadline is. A probe's attempts are not counted.
func (c *Client) countAttempt(body *wireBody, err *Error) *Error {
	if err != nil && !errors.Is(err.Err, context.Canceled) {
		if f := c.metricsFor(body).attemptFailures[err.Reason]; f != nil {
			f.Inc()
		}
	}
	return err
}
