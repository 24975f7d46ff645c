package gateway

import (
	"net/http"
	"strings"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
)

// ServeHTTP routes one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.cors.set(w.Header(), r.Header.Get("Origin")) // for the gateway's own answers; forward replaces them by the engine's
	api, ok := render.APIForPath(r.URL.Path)
	trimmed := strings.TrimRight(r.URL.Path, "/")
	if !ok && trimmed == GeneratePath {
		api, ok = apiGenerate, true
	}
	models := trimmed == modelsPath
	if models && r.URL.Path != modelsPath {
		// As for an inference path below: vLLM would answer the slashed
		// path with a redirect to its own address.
		r = withPath(r, modelsPath)
	}
	counting := trimmed == countTokensPath
	if (ok || models || counting) && corsPreflight(r) {
		// The engine's CORS policy (vLLM's --allowed-origins) answers it.
		h.serveOne(w, r, h.met.byAPI[apiPreflight])
		return
	}
	if ok {
		if r.Method != http.MethodPost {
			h.met.byAPI[api].results[ResultBadRequest].Inc()
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, api, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use POST")
			return
		}
		if p := strings.TrimRight(r.URL.Path, "/"); p != r.URL.Path {
			// The engine gets the API's own path: vLLM answers one with a
			// trailing slash by a redirect to its own address (the Host
			// the gateway sends), which the client would follow past the
			// gateway.
			r = withPath(r, p)
		}
		h.serveInference(w, r, api)
		return
	}
	if models {
		if !h.readOnly(w, r, modelsPath) {
			return
		}
		h.serveModels(w, r)
		return
	}
	if counting {
		h.serveCountTokens(w, r)
		return
	}
	h.met.unrouted.Inc()
	writeError(w, render.APICompletions, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
}

// readOnly reports whether r, for path (one of methodPaths), is a GET or a
// HEAD; any other method is answered 405 with Allow, as vLLM's router
// answers a method a route does not serve (not 404: the path is known),
// and counted.
func (h *Handler) readOnly(w http.ResponseWriter, r *http.Request, path string) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	h.met.notAllowed[path].Inc()
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, render.APICompletions, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use GET")
	return false
}

// modelsPath is vLLM's model listing, which the gateway forwards.
const modelsPath = "/v1/models"

// apiModels labels modelsPath's requests in the gateway's metrics.
const apiModels render.API = "models"

// apiPreflight labels the CORS preflights (corsPreflight) of every route
// in the gateway's metrics: they are forwarded to an engine as a listing is,
// not requests of the route's API.
const apiPreflight render.API = "preflight"

// withPath returns a shallow copy of r whose URL has path p.
func withPath(r *http.Request, p string) *http.Request {
	c := *r
	u := *r.URL
	u.Path, u.RawPath = p, ""
	c.URL = &u
	return &c
}

// corsPreflight reports whether r is a browser's CORS preflight: an
// OPTIONS with Origin and Access-Control-Request-Method.
func corsPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		r.Header.Get("Access-Control-Request-Method") != ""
}

// serveModels forwards GET /v1/models to the endpoints in turn (or, in
// multi-model mode, answers it), counting its result under api "models".
func (h *Handler) serveModels(w http.ResponseWriter, r *http.Request) {
	am := h.met.byAPI[apiModels]
	if h.served != nil {
		h.serveServedModels(w)
		am.results[ResultSuccess].Inc()
		return
	}
	h.serveOne(w, r, am)
}

// serveOne forwards r, without a body or a routing decision, to the
// endpoints in turn, and counts its result on am (nil: not counted).
func (h *Handler) serveOne(w http.ResponseWriter, r *http.Request, am *apiMetrics) {
	eps := *h.endpoints.Load()
	if len(eps) == 0 {
		if am != nil {
			am.results[ResultNoEndpoint].Inc()
		}
		writeError(w, render.APICompletions, http.StatusServiceUnavailable, "the gateway has no endpoints")
		return
	}
	ep := eps[(h.models.Add(1)-1)%uint64(len(eps))]
	res, _ := h.forward(w, r, nil, &kvroute.Decision{Endpoint: ep}, h.now(), am, nil, nil)
	if am != nil {
		am.results[res].Inc()
	}
	if res == ResultUpstreamBroken {
		panic(http.ErrAbortHandler)
	}
}
