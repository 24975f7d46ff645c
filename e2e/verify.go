package e2e

import (
	"context"
	"fmt"
	"io"

	"github.com/kvroute/kvroute/render"
)

// Render metrics of the router (package render), read from the gateway's
// /metrics.
const (
	metricRenderDuration = render.MetricDuration + "_count"
	metricRenderFailures = render.MetricFailures
)

// verify checks the deployment: the render check on every engine, one request
// per API through the gateway, and a request the router must tokenize itself
// (render success counter +1, failures unchanged).
func verify(ctx context.Context, c *cluster, w io.Writer) error {
	results, err := render.Check(ctx, c.renderEndpoints(), render.CheckOptions{Model: c.model})
	for _, r := range results {
		fmt.Fprintf(w, "  render check  %s\n", r)
	}
	if err != nil {
		return err
	}

	gw := c.gw.URL()
	requests := []struct {
		path string
		body map[string]any
	}{
		{"/v1/completions", map[string]any{"model": c.model, "prompt": "Say hello to kvroute.", "max_tokens": 8}},
		{"/v1/chat/completions", map[string]any{"model": c.model, "max_tokens": 8,
			"messages": []map[string]string{{"role": "user", "content": "Say hello to kvroute."}}}},
		{"/v1/messages", map[string]any{"model": c.model, "max_tokens": 8,
			"messages": []map[string]string{{"role": "user", "content": "Say hello to kvroute."}}}},
		{"/v1/responses", map[string]any{"model": c.model, "input": "Say hello to kvroute.", "max_output_tokens": 8}},
	}
	for _, rq := range requests {
		r, err := send(ctx, c.client, gw+rq.path, rq.body)
		if err != nil {
			return fmt.Errorf("gateway %s: %w", rq.path, err)
		}
		if r.PromptTokens == 0 {
			return fmt.Errorf("gateway %s: the router could not tokenize the request (see %s/metrics, %s)",
				rq.path, gw, metricRenderFailures)
		}
		fmt.Fprintf(w, "  POST %-21s 200 via %s (router rendered %d prompt tokens)\n", rq.path, r.Endpoint, r.PromptTokens)
	}

	before, err := Scrape(ctx, c.client, gw)
	if err != nil {
		return err
	}
	if _, err := send(ctx, c.client, gw+"/v1/completions",
		map[string]any{"model": c.model, "prompt": "One more, to watch the render counters.", "max_tokens": 4}); err != nil {
		return err
	}
	after, err := Scrape(ctx, c.client, gw)
	if err != nil {
		return err
	}
	succ := after.Get(metricRenderDuration, "result", "success") - before.Get(metricRenderDuration, "result", "success")
	fail := after.Sum(metricRenderFailures) - before.Sum(metricRenderFailures)
	fmt.Fprintf(w, "  router render: %s{result=\"success\"} %+.0f, %s %+.0f\n",
		metricRenderDuration, succ, metricRenderFailures, fail)
	if succ != 1 || fail != 0 {
		return fmt.Errorf("router render check: success counter moved by %.0f (want +1), failures by %.0f (want 0)", succ, fail)
	}
	return nil
}
