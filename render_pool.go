package kvroute

import (
	"errors"

	"github.com/kvroute/kvroute/render"
)

// ErrFixedRenderURL is returned by SetRenderEndpoints when Config.Render.URL
// names one fixed renderer, or rendering is disabled.
var ErrFixedRenderURL = errors.New("kvroute: the router renders through a fixed URL (or not at all); it has no render pool")

// SetRenderEndpoints gives the render client a pool of its own: renderers
// that are not the routed engines (a Deployment of vLLM renderers in front of
// an SGLang fleet, for instance). From the first call on, SetEndpoints no
// longer feeds the render client, and each call replaces the pool; the
// client keeps its round robin and its one retry on another endpoint. It is
// an error when Config.Render.URL is set or rendering is disabled.
func (r *Router) SetRenderEndpoints(eps []render.Endpoint) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("kvroute: router closed")
	}
	if r.render == nil || r.cfg.Render.URL != "" {
		return ErrFixedRenderURL
	}
	r.renderPool = true
	return r.render.SetEndpoints(eps)
}
