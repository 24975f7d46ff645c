package render

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// CheckOptions configures Check.
type CheckOptions struct {
	// Model is the model the endpoints must render for (the deployment's
	// base model name). Required: an empty name would pass on any vLLM.
	Model string
	// Prompt is the text rendered; default "Hello, world!".
	Prompt string
	// Authorization is sent with each check ("" sends none).
	Authorization string
	// Timeout bounds each endpoint's check; default 5 s.
	Timeout time.Duration
	// Parallelism is how many endpoints are checked at once; default 8.
	Parallelism int
	// TLSConfig is used for https endpoints (nil = system roots).
	TLSConfig *tls.Config
}

// CheckResult is the outcome of the render check on one endpoint.
type CheckResult struct {
	// Endpoint is the endpoint checked.
	Endpoint Endpoint
	// Tokens is the number of token IDs the endpoint rendered.
	Tokens int
	// Duration is how long the check took.
	Duration time.Duration
	// Err is nil when the endpoint rendered token IDs for the model, and an
	// *Error otherwise (errors.Is(Err, ErrRenderNotEnabled) for a vLLM started
	// without --enable-scale-out, ErrModelNotFound for a model mismatch).
	Err error
}

// OK reports whether the endpoint passed.
func (r CheckResult) OK() bool { return r.Err == nil }

// String formats the result as one report line.
func (r CheckResult) String() string {
	if r.Err != nil {
		return fmt.Sprintf("FAIL %s (%s): %v", r.Endpoint.ID, r.Endpoint.URL, r.Err)
	}
	return fmt.Sprintf("ok   %s (%s): %d tokens in %v", r.Endpoint.ID, r.Endpoint.URL, r.Tokens, r.Duration.Round(time.Millisecond))
}

// Check verifies that every endpoint serves the render routes a router
// tokenizes through: a POST of {"model": Model, "prompt": Prompt} to
// /v1/completions/render must answer 200 with at least one token ID. Each
// endpoint is tried once (no retry, no metrics). It returns one result per
// endpoint, in the given order, and an error naming the failed endpoints when
// any failed.
func Check(ctx context.Context, endpoints []Endpoint, opts CheckOptions) ([]CheckResult, error) {
	if opts.Model == "" {
		return nil, errors.New("render: check: a model name is required")
	}
	if opts.Prompt == "" {
		opts.Prompt = "Hello, world!"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = 8
	}
	cfg := DefaultConfig()
	cfg.Timeout = opts.Timeout
	cfg.AttemptTimeout = new(time.Duration(0)) // one endpoint, the whole budget
	cfg.ModelName = opts.Model
	c, err := New(cfg, Options{TLSConfig: opts.TLSConfig})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	body, err := json.Marshal(struct {
		Model     string `json:"model"`
		Prompt    string `json:"prompt"`
		MaxTokens int    `json:"max_tokens"`
	}{opts.Model, opts.Prompt, 1})
	if err != nil {
		return nil, err
	}
	wire := wholeBody(body)

	results := make([]CheckResult, len(endpoints))
	sem := make(chan struct{}, opts.Parallelism)
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		results[i].Endpoint = ep
		if err := validateBaseURL(ep.URL); err != nil {
			results[i].Err = &Error{Reason: ReasonOther, Endpoint: ep.ID, Err: err}
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			actx, cancel := context.WithTimeout(ctx, opts.Timeout)
			defer cancel()
			start := time.Now()
			res := new(Result)
			e := c.attempt(actx, newTarget(ep.ID, ep.URL, nil), routeCompletions, &wire, opts.Authorization, res, nil)
			results[i].Duration = time.Since(start)
			if e != nil {
				results[i].Err = e
				return
			}
			for _, p := range res.Prompts {
				results[i].Tokens += len(p.TokenIDs)
			}
		}()
	}
	wg.Wait()
	var failed []error
	for _, r := range results {
		if r.Err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", r.Endpoint.ID, r.Err))
		}
	}
	if len(failed) > 0 {
		return results, fmt.Errorf("render: check failed on %d of %d endpoints: %w", len(failed), len(results), errors.Join(failed...))
	}
	return results, nil
}
