package kvroute

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/kvroute/kvroute/render"
)

// Request is what the router needs to know about one inference request.
type Request struct {
	// ID identifies the request in logs and, when set, makes its Decision
	// addressable by it (Router.Decision) for hosts whose hooks see only
	// the ID. It must be unique among requests in
	// flight (Pick refuses a duplicate with tokenload.ErrDuplicateRequestID)
	// and at most 256 bytes; optional.
	ID string
	// API is the inference API of Body, required when the request is
	// rendered (Pick fails with ErrNoAPI otherwise); render.APIForPath gives it
	// from the request's path.
	API render.API
	// Body is the client's JSON body. It is rendered (tokenized) through
	// the render endpoints unless Prompts is set. kvroute's gateway and
	// kvroute-epp hand it over as vLLM reads it (a UTF-16 or UTF-32 body
	// decoded to UTF-8, a leading byte order mark dropped); a profile that
	// reads its members (package disagg) expects UTF-8.
	Body []byte
	// Header is the inbound request header; Authorization is forwarded to the
	// render endpoints.
	Header http.Header
	// Model is the model name the request targets (it roots the block
	// keys, is rendered as, and selects the candidates: only the endpoints
	// serving it, see Endpoint.Models); empty means Config.Model. A model
	// no candidate serves is an error (ErrModelMismatch) when any candidate
	// lists its Models or KV events are on, so that such a request is never
	// routed cache-blind.
	Model string
	// LoRA is the adapter name when the request targets a LoRA adapter; it
	// replaces Model at the root of the block keys, as vLLM's lora_name does.
	// When empty, Match sets it to the default multimodal adapter vLLM
	// would attach to the request (Config.DefaultMMLoRAs), if any.
	LoRA string
	// CacheSalt is the request's cache_salt; when the request is rendered,
	// the render result's salt is used instead.
	CacheSalt string
	// Prompts are already-rendered prompts: token IDs as the engine sees
	// them (after chat templating and multimodal placeholder expansion) and
	// multimodal items, the type render answers decode into, so a gateway
	// that tokenizes by itself fills the same type. When non-empty the
	// router does not call the render endpoints.
	Prompts []render.Prompt
	// Fallbacks is how many fallback endpoints the Decision should name
	// after its pick (Decision.Fallbacks): the next best candidates, for a
	// gateway that tries them in order when the pick fails (the Inference
	// Extension's endpoint-picker protocol lets Envoy retry down such a
	// list). 0, the default, ranks nothing and costs nothing.
	Fallbacks int
	// KeepPrompts asks for the request's prompts in Decision.Prompts (and
	// its cache salt in Decision.CacheSalt), so that a gateway can forward
	// the token IDs the router rendered instead of the text, and the engine
	// does not tokenize the prompt a second time. Off, the default, the
	// rendered token arrays stay in the router's scratch for the next
	// request.
	KeepPrompts bool
	// RemotePrefill says that another endpoint prefills the request and its
	// KV cache is transferred to the chosen one, which only decodes (the
	// decode pick of a disaggregated request, vLLM's do_remote_prefill):
	// Commit charges the chosen endpoint an open request and none of the
	// prompt's tokens. Its speculative index entries are written as usual:
	// the transferred blocks land there. Its Decision carries no prediction
	// for the accuracy loop (the engine reports the transferred prompt as
	// cached).
	RemotePrefill bool
	// PrefillOnly says that the chosen endpoint only prefills the request
	// and answers one token (the prefill pick of a disaggregated request,
	// vLLM's do_remote_decode): the Decision's FirstChunk ends its part
	// whole, its open request included, as llm-d releases a prefill pick at
	// the first response chunk.
	PrefillOnly bool
	// Session is the request's session key: requests that carry the same
	// key are turns of one conversation or agent loop. The router does not
	// interpret it; a session-affinity scorer (package session) reads it
	// to prefer the endpoint that served the session's last turn, and
	// session.Profile sets it from the request's headers when empty.
	// Empty means no session.
	Session string
}

// Errors for the mistakes that would otherwise route without cache
// information and tell nobody.
var (
	// ErrEndpointsNotSet is returned by Pick and Match when the router
	// depends on its endpoint list (KV-event subscriptions, or rendering on
	// the routed endpoints) and SetEndpoints was never called.
	ErrEndpointsNotSet = errors.New("kvroute: SetEndpoints was never called: no KV events are subscribed and nothing can render the request")
	// ErrNoAPI is returned by Pick and Match for a request that must be
	// rendered (it carries no Prompts) but names no known API; see
	// render.APIForPath.
	ErrNoAPI = errors.New("kvroute: the request names no inference API (set Request.API, e.g. from render.APIForPath)")
	// ErrModelMismatch is returned by Pick and Match for a request whose
	// model no candidate endpoint serves: with Endpoint.Models listed by
	// any candidate, a model none of them lists; without, a Model other
	// than the router's Config.Model while KV events are on (every event
	// is then indexed under Config.Model, so the request could never
	// match). A gateway answers it as OpenAI's 404 model_not_found. Leave
	// Model empty for the base model, or set LoRA for an adapter.
	ErrModelMismatch = errors.New("kvroute: no endpoint serves the request's model")
)

func knownAPI(a render.API) bool {
	switch a {
	case render.APICompletions, render.APIChatCompletions, render.APIMessages, render.APIResponses:
		return true
	}
	return false
}

// checkRequest reports the request-side mistakes of ErrEndpointsNotSet and
// ErrNoAPI (forModel reports ErrModelMismatch).
func (r *Router) checkRequest(req *Request) error {
	if r.needsEndpoints.Load() && !r.endpointsSet.Load() {
		return ErrEndpointsNotSet
	}
	if len(req.Prompts) == 0 && r.render != nil && !knownAPI(req.API) {
		if req.API == "" {
			return ErrNoAPI
		}
		return fmt.Errorf("%w: %q is not one of completions, chat_completions, messages, responses", ErrNoAPI, req.API)
	}
	return nil
}

// forModel narrows endpoints to those serving the request's model (see
// Endpoint.Models). When no endpoint lists Models and the model is
// Config.Model, it returns endpoints itself: a one-model router pays one
// pass over the list and allocates nothing.
func (r *Router) forModel(req *Request, endpoints []Endpoint) ([]Endpoint, error) {
	base := r.cfg.Model
	listed := false
	for i := range endpoints {
		if len(endpoints[i].Models) > 0 {
			listed = true
			break
		}
	}
	if !listed {
		if r.events != nil && req.Model != "" && req.Model != base {
			return nil, fmt.Errorf("%w: %q, router model %q", ErrModelMismatch, req.Model, base)
		}
		return endpoints, nil
	}
	n := 0
	for i := range endpoints {
		if endpoints[i].serves(req.Model, base) {
			n++
		}
	}
	switch {
	case n == len(endpoints):
		return endpoints, nil
	case n == 0:
		model := req.Model
		if model == "" {
			model = base
		}
		return nil, fmt.Errorf("%w: %q is served by none of the %d candidate endpoints", ErrModelMismatch, model, len(endpoints))
	}
	out := make([]Endpoint, 0, n)
	for i := range endpoints {
		if endpoints[i].serves(req.Model, base) {
			out = append(out, endpoints[i])
		}
	}
	return out, nil
}
