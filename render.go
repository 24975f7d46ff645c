package kvroute

import (
	"context"
	"errors"

	"github.com/kvroute/kvroute/render"
)

// errRenderDisabled is the render error of a request without prompts when
// rendering is disabled.
var errRenderDisabled = errors.New("kvroute: rendering disabled and the request carries no prompts")

// render is the render stage: the request's prompts (given, or the render
// client's answer), its cache salt and the render failure, if any. A
// failure is counted and the request routed by load alone, unless ctx has
// ended: then the caller is gone and render returns ctx's error.
func (s *Selection) render(ctx context.Context) error {
	s.prompts, s.salt, s.renderErr = s.r.prompts(ctx, s.req, &s.st)
	if s.renderErr == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.r.met.renderFallbacks.Inc()
	s.r.log.Debug("render failed; routing by load alone", "request", s.req.ID, "err", s.renderErr)
	return nil
}

// prompts returns the request's prompts: the given ones, or the render
// client's answer. The returned slice is valid until st is reused.
func (r *Router) prompts(ctx context.Context, req *Request, st *pickState) ([]render.Prompt, string, error) {
	if len(req.Prompts) > 0 {
		return req.Prompts, req.CacheSalt, nil
	}
	if r.render == nil {
		return nil, "", errRenderDisabled
	}
	auth := ""
	if req.Header != nil {
		auth = req.Header.Get("Authorization")
	}
	// The scratch's render result is reused, so that its token arrays are:
	// a 2,000-token prompt then costs no 8 KB array per request.
	res := &st.renderRes
	model := req.Model
	if model == "" {
		model = r.cfg.Model
	}
	if err := r.render.RenderInto(ctx, &render.Request{API: req.API, Body: req.Body, Authorization: auth, Model: model,
		KeepTokenJSON: req.KeepPrompts}, res); err != nil {
		return nil, "", err
	}
	salt := res.CacheSalt
	if salt == "" {
		salt = req.CacheSalt
	}
	return res.Prompts, salt, nil
}
