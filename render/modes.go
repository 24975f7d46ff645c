package render

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
)

// modeState is the auto-mode state of one API (Messages or Responses).
type modeState struct {
	resolved atomic.Pointer[Mode] // nil while unresolved
	slot     chan struct{}        // one-slot semaphore serializing discovery
	probed   atomic.Uint64        // probes run so far (under slot)
	warnOnce sync.Once            // the legacy deprecation warning
}

func modeIndex(r route) int {
	if r == routeResponses {
		return 1
	}
	return 0
}

func (c *Client) configuredMode(r route) Mode {
	if r == routeResponses {
		return c.cfg.ResponsesRenderMode
	}
	return c.cfg.MessagesRenderMode
}

// modeFor returns the mode a Messages or Responses request uses. In auto mode
// it runs discovery when the mode is still unresolved (serialized; a waiting
// request gives up when ctx ends, and does not probe again when the probe it
// waited for left the mode unresolved). A request that finds the mode
// unresolved after discovery is sent natively; its own result never changes
// the mode.
func (c *Client) modeFor(ctx context.Context, r route, auth, model string) (Mode, *Error) {
	mode := c.configuredMode(r)
	if mode != ModeAuto {
		c.noteLegacy(r, mode)
		return mode, nil
	}
	st := &c.modes[modeIndex(r)]
	if m := st.resolved.Load(); m != nil {
		c.noteLegacy(r, *m)
		return *m, nil
	}
	// An unresolved outcome is logged by discover and retried by the next
	// request; this one goes to the native route, as do those that queued
	// for the slot behind the probe.
	if m, _ := c.discover(ctx, r, auth, model, false); m != ModeAuto {
		c.noteLegacy(r, m)
		return m, nil
	}
	if ctx.Err() != nil {
		// The wait or the probe ran out of time: this request cannot be
		// rendered in time either.
		return "", &Error{Reason: ReasonTimeout, Err: ctx.Err()}
	}
	return ModeNative, nil
}

// noteLegacy logs the deprecation warning the first time legacy mode is used
// for an API.
func (c *Client) noteLegacy(r route, m Mode) {
	if m != ModeLegacy {
		return
	}
	c.modes[modeIndex(r)].warnOnce.Do(func() {
		c.log.Warn("render: legacy mode is deprecated: requests are translated into chat-completions render calls; "+
			"upgrade the renderer to a vLLM with native "+routePaths[r]+" and use native or auto mode",
			"path", routePaths[r])
	})
}

// Discover resolves the auto mode of api (APIMessages or APIResponses) by
// probing the renderer, unless it is resolved already, and returns the mode
// requests will use: ModeNative or ModeLegacy, or ModeAuto with the probe's
// error while still unresolved. Run it at start-up to keep probes out of the
// first requests; authorization is sent with the probes (e.g. "Bearer " +
// the VLLM_API_KEY value). For configured native or legacy modes it returns
// that mode without probing. Probes are not counted in the metrics.
func (c *Client) Discover(ctx context.Context, api API, authorization string) (Mode, error) {
	r, ok := api.route()
	if !ok || (r != routeMessages && r != routeResponses) {
		return "", &Error{Reason: ReasonOther, Err: ErrInvalidRequest}
	}
	if m := c.configuredMode(r); m != ModeAuto {
		return m, nil
	}
	bctx, cancel := context.WithTimeout(ctx, c.budget(r))
	defer cancel()
	m, err := c.discover(bctx, r, authorization, "", true)
	if err != nil {
		return m, err
	}
	return m, nil
}

// discover runs the probe protocol once under the API's slot. It returns
// ModeAuto and the error that left the mode unresolved, or the resolved mode.
// Unless always is set (Discover), a caller that waited for the slot while
// another caller's probe ran does not probe again when that probe left the
// mode unresolved: it returns ModeAuto at once, so that callers queued
// behind a renderer failing or slow to answer the probe wait for that one
// probe, not for one each.
func (c *Client) discover(ctx context.Context, r route, auth, model string, always bool) (Mode, *Error) {
	st := &c.modes[modeIndex(r)]
	probed := st.probed.Load()
	if h := c.queueHook; h != nil {
		h()
	}
	select {
	case st.slot <- struct{}{}:
	case <-ctx.Done():
		return ModeAuto, &Error{Reason: ReasonTimeout, Err: ctx.Err()}
	}
	defer func() { <-st.slot }()
	if m := st.resolved.Load(); m != nil {
		return *m, nil
	}
	if c.closed.Load() {
		return ModeAuto, &Error{Reason: ReasonOther, Err: ErrClosed}
	}
	if !always && st.probed.Load() != probed {
		return ModeAuto, &Error{Reason: ReasonOther, Err: errProbedWhileQueued}
	}
	mode, err := c.probe(ctx, r, auth, model)
	st.probed.Add(1)
	if mode == ModeAuto {
		c.log.Info("render: mode discovery unresolved; will probe again on the next request",
			"path", routePaths[r], "error", err.Error())
		return ModeAuto, err
	}
	st.resolved.Store(&mode)
	c.log.Info("render: mode resolved", "path", routePaths[r], "mode", string(mode))
	return mode, nil
}

// errProbedWhileQueued is discover's error for a caller that queued behind
// a probe that left the mode unresolved.
var errProbedWhileQueued = errors.New("render: mode discovery unresolved by the probe run while this request waited")

// probe sends the native probe and, when the native route is missing, the
// chat-completions probe.
func (c *Client) probe(ctx context.Context, r route, auth, name string) (Mode, *Error) {
	if name == "" {
		name = c.cfg.ModelName
	}
	model, _ := json.Marshal(name)
	var native string
	if r == routeMessages {
		native = `{"model":` + string(model) + `,"max_tokens":1,"messages":[{"role":"user","content":"warmup"}]}`
	} else {
		native = `{"model":` + string(model) + `,"max_output_tokens":1,"input":"warmup"}`
	}
	nb := wholeBody([]byte(native))
	nb.model, nb.probe = name, true // to an endpoint serving the model probed
	err := c.call(ctx, r, &nb, auth, nil)
	if err == nil {
		return ModeNative, nil
	}
	missing := err.Reason == ReasonStatus &&
		(err.Status == 404 || err.Status == 405 || (err.Status == 501 && r == routeResponses))
	if !missing {
		return ModeAuto, err
	}
	chat := `{"model":` + string(model) + `,"max_tokens":1,"messages":[{"role":"user","content":"warmup"}]}`
	cb := wholeBody([]byte(chat))
	cb.model, cb.probe = name, true
	if cerr := c.call(ctx, routeChat, &cb, auth, nil); cerr != nil {
		return ModeAuto, cerr
	}
	return ModeLegacy, nil
}

// translate converts a Messages or Responses body into a chat-completions
// body for legacy mode.
func (c *Client) translate(r route, body []byte, model string) ([]byte, error) {
	if model == "" {
		model = c.cfg.ModelName
	}
	if r == routeResponses {
		return translateResponses(body, model)
	}
	return translateMessages(body, model)
}
