package kvroute

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/kvroute/kvroute/render"
)

// Picker is the small interface a gateway uses: one call per request, which
// returns the endpoint to forward the request to. The gateway then reports the
// request's first response chunk and its end on the returned Decision.
type Picker interface {
	// Pick chooses one of endpoints for req. It fails when no endpoint can
	// be chosen (an empty candidate list or a cancelled context) and, for a
	// Router, on the mistakes that would route without cache information
	// (ErrEndpointsNotSet, ErrNoAPI, ErrModelMismatch) or a request ID
	// already in flight; a failed render is not an error: the request is
	// routed by load alone and the Decision says so.
	Pick(ctx context.Context, req *Request, endpoints []Endpoint) (*Decision, error)
}

// Endpoint is one model-server endpoint (a vLLM or SGLang server) a request
// may be routed to.
type Endpoint struct {
	// ID is the endpoint's identity, "ip:port" of its inference port. It must
	// equal the identity the engine's KV events are attributed to.
	ID string `json:"id"`
	// Address is the base URL requests and render calls go to; empty means
	// "http://" + ID.
	Address string `json:"address,omitempty"`
	// Labels are free-form labels; the event subscription selector matches
	// them.
	Labels map[string]string `json:"labels,omitempty"`
	// EventsAddress is the engine's KV-event PUB socket ("tcp://host:port");
	// empty means tcp://<ID host>:<Config.Events.EventsPort + Rank>. Set it
	// when engines share a host or use per-engine ports.
	EventsAddress string `json:"eventsAddress,omitempty"`
	// ReplayAddress is the engine's replay ROUTER socket; empty means
	// tcp://<ID host>:<Config.Events.ReplayPort + Rank> when replay is on.
	ReplayAddress string `json:"replayAddress,omitempty"`
	// Rank is the engine's data-parallel rank: vLLM offsets both event ports
	// by it.
	Rank int `json:"rank,omitempty"`
}

// URL returns the endpoint's base URL: Address, or "http://" + ID.
func (e Endpoint) URL() string {
	if e.Address != "" {
		return strings.TrimRight(e.Address, "/")
	}
	return "http://" + e.ID
}

// API names the inference API a request belongs to; it selects the render
// route.
type API = render.API

// The inference APIs kvroute renders.
const (
	APICompletions     = render.APICompletions
	APIChatCompletions = render.APIChatCompletions
	APIMessages        = render.APIMessages
	APIResponses       = render.APIResponses
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
	// rendered (Pick fails with ErrNoAPI otherwise); APIForPath gives it
	// from the request's path.
	API API
	// Body is the client's JSON body, as received. It is rendered (tokenized)
	// through the render endpoints unless Prompts is set.
	Body []byte
	// Header is the inbound request header; Authorization is forwarded to the
	// render endpoints.
	Header http.Header
	// Model is the base model name the engines serve (it roots the block
	// keys); empty means Config.Model. With KV events on, any other value
	// than Config.Model is an error (ErrModelMismatch): every event is
	// indexed under Config.Model, so the request could never match.
	Model string
	// LoRA is the adapter name when the request targets a LoRA adapter; it
	// replaces Model at the root of the block keys, as vLLM's lora_name does.
	LoRA string
	// CacheSalt is the request's cache_salt; when the request is rendered,
	// the render result's salt is used instead.
	CacheSalt string
	// Prompts are already-rendered prompts (token IDs and multimodal items);
	// when non-empty the router does not call the render endpoints.
	Prompts []Prompt
}

// Prompt is one rendered prompt: TokenIDs as the engine sees them (after chat
// templating and multimodal placeholder expansion) and Features, its
// multimodal items sorted by Offset (nil for text). It is render.Prompt, the
// type render answers decode into, so a rendered request is used as decoded;
// a gateway that tokenizes by itself fills the same type.
type Prompt = render.Prompt

// MMFeature is one multimodal item of a Prompt: its content hash (vLLM's
// mm_hash) and the placeholder tokens it occupies. Every block the item
// overlaps is keyed by the hash, since placeholder token IDs are the same for
// every image. It is render.MMFeature.
type MMFeature = render.MMFeature

// ErrNoEndpoints is returned by Pick when the candidate list is empty.
var ErrNoEndpoints = errors.New("kvroute: no candidate endpoints")
