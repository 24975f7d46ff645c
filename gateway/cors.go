package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The gateway's own answers (its 400s, 404s, 413s, 429s, 503s) are written
// by the gateway, not the engine, so they carry none of the CORS headers
// the engine's policy (vLLM's --allowed-origins and --allow-credentials,
// FastAPI's CORSMiddleware) puts on its responses: a browser client then
// cannot read why its request was refused, and sees a network error
// instead. Config.CORSAllowedOrigins gives those answers the headers the
// engine's policy would. Responses from an engine keep exactly the
// engine's CORS headers, and preflights go to the engine, so the gateway
// never grants what the engine's policy refuses.

// corsPolicy is Config.CORSAllowedOrigins and Config.CORSAllowCredentials,
// checked once.
type corsPolicy struct {
	any         bool     // "*" listed
	origins     []string // the listed origins, "*" aside
	credentials bool
}

// newCORSPolicy checks the configured origins: "*" or an origin
// (scheme://host[:port], no path). It returns nil when none is configured.
func newCORSPolicy(origins []string, credentials bool) (*corsPolicy, error) {
	if len(origins) == 0 {
		if credentials {
			return nil, fmt.Errorf("gateway: corsAllowCredentials needs corsAllowedOrigins")
		}
		return nil, nil
	}
	p := &corsPolicy{credentials: credentials}
	for _, o := range origins {
		switch {
		case o == "*":
			p.any = true
		case !validOrigin(o):
			return nil, fmt.Errorf("gateway: corsAllowedOrigins: %q is not \"*\" or an origin (scheme://host[:port])", o)
		default:
			p.origins = append(p.origins, o)
		}
	}
	return p, nil
}

// validOrigin reports whether o is a serialized origin: an http or https
// scheme, a host and an optional port, nothing after.
func validOrigin(o string) bool {
	rest, ok := strings.CutPrefix(o, "https://")
	if !ok {
		rest, ok = strings.CutPrefix(o, "http://")
	}
	return ok && rest != "" && !strings.ContainsAny(rest, "/?#@ \t")
}

// set puts on h the headers the engine's CORS policy gives a response to a
// request from origin (none for a request without an Origin, or from an
// origin the policy does not list), as Starlette's CORSMiddleware does: the
// origin echoed (or "*" when any origin is allowed without credentials) and,
// when echoed, Vary: Origin.
func (p *corsPolicy) set(h http.Header, origin string) {
	if p == nil || origin == "" {
		return
	}
	switch {
	case p.any && !p.credentials:
		h.Set("Access-Control-Allow-Origin", "*")
	case p.any || slices.Contains(p.origins, origin):
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
	default:
		return
	}
	if p.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
}

// unset removes what set put on h, before the engine's own headers are
// copied onto a response the engine answers.
func (p *corsPolicy) unset(h http.Header) {
	if p == nil {
		return
	}
	h.Del("Access-Control-Allow-Origin")
	h.Del("Access-Control-Allow-Credentials")
	h.Del("Vary")
}
