package kvroute

import (
	"errors"

	"github.com/kvroute/kvroute/render"
)

// renderSource is where a Router renders the prompts of requests that come
// without tokens: one of four, held in one place instead of being derived
// from Config.DisableRender, Config.Render.URL and whether
// SetRenderEndpoints was called.
type renderSource uint8

const (
	// renderFromEndpoints renders on the routed endpoints themselves (fed
	// by SetEndpoints): the default, without Config.Render.URL.
	renderFromEndpoints renderSource = iota
	// renderFromURL renders through one fixed renderer, Config.Render.URL.
	renderFromURL
	// renderFromPool renders on a pool of renderers of its own, fed by
	// SetRenderEndpoints; a router rendering on its endpoints switches to
	// it at the first call.
	renderFromPool
	// renderOff renders nothing (Config.DisableRender): requests without
	// prompts are routed by load alone.
	renderOff
)

// renderSourceOf is the render source a Router starts with.
func renderSourceOf(cfg Config) renderSource {
	switch {
	case cfg.DisableRender:
		return renderOff
	case cfg.Render.URL != "":
		return renderFromURL
	}
	return renderFromEndpoints
}

// ErrFixedRenderURL is returned by SetRenderEndpoints when Config.Render.URL
// names one fixed renderer, or rendering is disabled.
var ErrFixedRenderURL = errors.New("kvroute: the router renders through a fixed URL (or not at all); it has no render pool")

// SetRenderEndpoints gives the render client a pool of its own: renderers
// that are not the routed engines (a Deployment of vLLM renderers in front of
// an SGLang fleet, for instance). From the first call on, SetEndpoints no
// longer feeds the render client, and each call replaces the pool; the
// client keeps its round robin and its one retry on another endpoint. With
// KV events off, Pick then needs no SetEndpoints (ErrEndpointsNotSet is for
// a router that depends on its endpoint list). It is an error when
// Config.Render.URL is set or rendering is disabled.
func (r *Router) SetRenderEndpoints(eps []render.Endpoint) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("kvroute: router closed")
	}
	if r.renderFrom != renderFromEndpoints && r.renderFrom != renderFromPool {
		return ErrFixedRenderURL
	}
	r.renderFrom = renderFromPool
	r.needsEndpoints.Store(r.events != nil) // the pool renders: only the KV events still need SetEndpoints
	return r.render.SetEndpoints(eps)
}

// RenderCapacity returns the load of the render endpoint with the given ID
// (renders in flight against its concurrency limit, renders queued, the
// recent queue wait and latency; see render.Capacity), false when the
// router has no such render endpoint or renders nothing. It is a saturation
// signal for a host or an admission stage: a render that finds no slot
// within the render config's maxQueueWait makes its request route by load.
func (r *Router) RenderCapacity(endpointID string) (render.Capacity, bool) {
	if r.render == nil {
		return render.Capacity{}, false
	}
	return r.render.Capacity(endpointID)
}
