package llmd

import (
	"fmt"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
)

// translated is what a parameters block translates to: the settings it
// makes and the findings of the keys it does not carry over.
type translated struct {
	sets     []setting
	findings []Finding
}

// settings translates the token producer's vllm block, at path at, onto
// kvroute's render keys; top is the kvroute document, whose own render keys
// take the place of llm-d's defaults. What llm-d's token producer refuses
// (url beside endpointDiscovery, an attemptTimeout that is not positive, a
// load balancer other than round-robin) is an error naming the keys.
func (v *vllmRender) settings(at string, top map[string]any) (translated, error) {
	var out translated
	urlSet := has(top, "render.url")
	add := func(from, to string, set func(c *kvroute.Config)) {
		out.sets = append(out.sets, setting{at + "." + from, to, set})
	}
	d := v.EndpointDiscovery
	switch {
	case v.URL != "" && d != nil:
		return out, invalid(fmt.Errorf("%s.url and %s.endpointDiscovery: only one of them may be set, as in llm-d", at, at))
	case d != nil && urlSet:
		return out, invalid(fmt.Errorf("%s.endpointDiscovery and render.url: the first renders on the routed endpoints, the second on one renderer; keep one", at))
	case v.URL != "":
		add("url", "render.url", func(c *kvroute.Config) { c.Render.URL = v.URL })
	case d == nil && !urlSet:
		out.findings = append(out.findings, Finding{Path: at + ".url", Kind: Different,
			Note: "absent, llm-d renders on http://localhost:8000 (a sidecar) unless endpointDiscovery is set; kvroute renders on the routed endpoints themselves unless render.url is set"})
	}
	if d != nil {
		if t := d.AttemptTimeout; t != nil {
			if *t <= 0 {
				return out, invalid(fmt.Errorf("%s.endpointDiscovery.attemptTimeout %v is not a positive duration, which llm-d refuses too", at, *t))
			}
			add("endpointDiscovery.attemptTimeout", "render.attemptTimeout", func(c *kvroute.Config) { c.Render.AttemptTimeout = new(*t) })
		} else if !has(top, "render.attemptTimeout") {
			out.findings = append(out.findings, Finding{Path: at + ".endpointDiscovery.attemptTimeout", Kind: Different,
				Note: fmt.Sprintf("absent, llm-d caps no render attempt (the first may take the whole timeout or mmTimeout budget); kvroute caps each at %v unless render.attemptTimeout says otherwise (0: no cap)", render.DefaultAttemptTimeout)})
		}
		if lb := d.LoadBalancer; lb != nil && lb.Type != "" && lb.Type != "round-robin" {
			return out, invalid(fmt.Errorf("%s.endpointDiscovery.loadBalancer.type %q: llm-d's token producer has the round-robin load balancer only, which is kvroute's render rotation", at, lb.Type))
		}
	}
	if v.Timeout != nil {
		add("timeout", "render.timeout", func(c *kvroute.Config) { c.Render.Timeout = *v.Timeout })
	}
	if v.MMTimeout != nil {
		add("mmTimeout", "render.mmTimeout", func(c *kvroute.Config) { c.Render.MMTimeout = *v.MMTimeout })
	}
	if v.MessagesRenderMode != "" {
		add("messagesRenderMode", "render.messagesRenderMode", func(c *kvroute.Config) { c.Render.MessagesRenderMode = v.MessagesRenderMode })
	}
	if v.ResponsesRenderMode != "" {
		add("responsesRenderMode", "render.responsesRenderMode", func(c *kvroute.Config) { c.Render.ResponsesRenderMode = v.ResponsesRenderMode })
	}
	if v.PrefillOnly != nil {
		add("prefillOnly", "render.prefillOnly", func(c *kvroute.Config) { c.Render.PrefillOnly = *v.PrefillOnly })
	}
	if v.OmitMMKwargs != nil {
		add("omitMMKwargs", "render.omitMMKwargs", func(c *kvroute.Config) { c.Render.OmitMMKwargs = new(*v.OmitMMKwargs) })
	}
	return out, nil
}
