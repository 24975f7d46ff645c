package kvroute

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/render"
)

// Errors for the mistakes that would otherwise route without cache
// information and tell nobody.
var (
	// ErrEndpointsNotSet is returned by Pick and Match when the router
	// depends on its endpoint list (KV-event subscriptions, or rendering on
	// the routed endpoints) and SetEndpoints was never called.
	ErrEndpointsNotSet = errors.New("kvroute: SetEndpoints was never called: no KV events are subscribed and nothing can render the request")
	// ErrNoAPI is returned by Pick and Match for a request that must be
	// rendered (it carries no Prompts) but names no known API; see
	// APIForPath.
	ErrNoAPI = errors.New("kvroute: the request names no inference API (set Request.API, e.g. from APIForPath)")
	// ErrModelMismatch is returned by Pick and Match for a request whose
	// Model is not the router's Config.Model while KV events are on: the
	// router indexes every engine's events under Config.Model, so such a
	// request could never match. Leave Model empty for the base model, or
	// set LoRA for an adapter.
	ErrModelMismatch = errors.New("kvroute: request model is not the router's model")
)

// APIForPath maps an inference path ("/v1/completions",
// "/v1/chat/completions", "/v1/messages", "/v1/responses", with or without a
// trailing slash) to its API, so a gateway can set Request.API from the path
// it received. ok is false for any other path, which kvroute cannot render.
func APIForPath(path string) (api API, ok bool) { return render.APIForPath(path) }

// validateRouting rejects the configurations that leave a Router unable to
// use cache information at all: New calls it after Validate.
func (c Config) validateRouting() error {
	switch {
	case c.Model == "":
		return fmt.Errorf("%w: model is required: it roots the block keys of every request and names the events' model (start from DefaultConfig and set Model)", ErrInvalidConfig)
	case c.Requests.MaxRequests < 0:
		return fmt.Errorf("%w: requests.maxRequests %d is negative", ErrInvalidConfig, c.Requests.MaxRequests)
	case c.Requests.TTL < 0:
		return fmt.Errorf("%w: requests.ttl %v is negative", ErrInvalidConfig, c.Requests.TTL)
	}
	return nil
}

func knownAPI(a API) bool {
	switch a {
	case APICompletions, APIChatCompletions, APIMessages, APIResponses:
		return true
	}
	return false
}

// checkRequest reports the request-side mistakes of ErrEndpointsNotSet,
// ErrNoAPI and ErrModelMismatch.
func (r *Router) checkRequest(req *Request) error {
	if r.needsEndpoints && !r.endpointsSet.Load() {
		return ErrEndpointsNotSet
	}
	if len(req.Prompts) == 0 && r.render != nil && !knownAPI(req.API) {
		if req.API == "" {
			return ErrNoAPI
		}
		return fmt.Errorf("%w: %q is not one of completions, chat_completions, messages, responses", ErrNoAPI, req.API)
	}
	if r.events != nil && req.Model != "" && req.Model != r.cfg.Model {
		return fmt.Errorf("%w: %q, router model %q", ErrModelMismatch, req.Model, r.cfg.Model)
	}
	return nil
}

// Reasons of kvroute_router_cache_blind_total: why a decision was made
// without cache information.
const (
	blindRenderFailed = iota
	blindRenderDisabled
	blindEventsDisabled
	numBlindReasons
)

var blindReasons = [numBlindReasons]string{
	blindRenderFailed:   "render_failed",
	blindRenderDisabled: "render_disabled",
	blindEventsDisabled: "events_disabled",
}

var blindHints = [numBlindReasons]string{
	blindRenderFailed:   "the request could not be tokenized; check the render endpoints (kvroute_render_* metrics)",
	blindRenderDisabled: "rendering is disabled and the request carried no Prompts",
	blindEventsDisabled: "KV events are disabled, so no engine's cache is indexed",
}

// blindWarnInterval spaces the warnings about cache-blind decisions.
const blindWarnInterval = time.Minute

// warnings rate-limits one warning per reason per blindWarnInterval.
type warnings struct {
	last [numBlindReasons]atomic.Int64 // unix ns of the last warning
}

// blind counts a load-only decision under the reason the router can name,
// and warns once per interval per reason. A load-only decision with none of
// these reasons (nothing cached anywhere yet) is normal and only counted in
// kvroute_router_decisions_total{kind="load_only"}.
func (r *Router) blind(s *Selection) {
	reason := -1
	switch {
	case errors.Is(s.renderErr, errRenderDisabled):
		reason = blindRenderDisabled
	case s.renderErr != nil:
		reason = blindRenderFailed
	case r.events == nil:
		reason = blindEventsDisabled
	}
	if reason < 0 {
		return
	}
	r.met.blind[reason].Inc()
	now := r.now().UnixNano()
	last := &r.warn.last[reason]
	if l := last.Load(); (l != 0 && now-l < int64(blindWarnInterval)) || !last.CompareAndSwap(l, now) {
		return
	}
	r.log.Warn("kvroute: routed without cache information (counted in kvroute_router_cache_blind_total; this warning repeats at most once a minute)",
		"reason", blindReasons[reason], "hint", blindHints[reason], "request", s.req.ID, "err", s.renderErr)
}
