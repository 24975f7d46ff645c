package kvroute

import (
	"strings"
)

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
	// SnapshotAddress is the engine's KV-cache snapshot ROUTER socket (its
	// kv-events-config snapshot_endpoint); empty means
	// tcp://<ID host>:<Config.Events.Snapshot.Port + Rank> when
	// events.snapshot.enabled, else no snapshots.
	SnapshotAddress string `json:"snapshotAddress,omitempty"`
	// Rank is the engine's data-parallel rank: vLLM offsets its KV-event,
	// replay and snapshot ports by it.
	Rank int `json:"rank,omitempty"`
	// Role is the endpoint's part in a prefill/decode-disaggregated
	// deployment: "prefill", "decode", or "" / "both" for an endpoint that
	// serves whole requests (package disagg names them and picks by them).
	// The router indexes every endpoint's KV events whatever its role; only
	// a Profile reads the role.
	Role string `json:"role,omitempty"`
	// Models are the model names the endpoint serves (vLLM's
	// --served-model-name, or what its /v1/models lists); empty means
	// Config.Model only. A request is routed only among the endpoints that
	// serve its model (Request.Model, else Config.Model), and the KV events
	// of an endpoint are indexed under its topic's model when the topic
	// (kv@<ip:port>@<model>) names one of these, so that an endpoint
	// serving two models keeps both in the index. Package models fills it
	// from configuration, discovery labels or the engines' /v1/models.
	Models []string `json:"models,omitempty"`
}

// serves reports whether e serves model (empty: base) on a router whose
// Config.Model is base.
func (e *Endpoint) serves(model, base string) bool {
	if model == "" {
		model = base
	}
	if len(e.Models) == 0 {
		return model == base
	}
	for _, m := range e.Models {
		if m == model {
			return true
		}
	}
	return false
}

// eventModel is the model e's KV events are indexed under when their topic
// names none of its models: base when e serves it, else its first model.
func (e *Endpoint) eventModel(base string) string {
	if len(e.Models) == 0 || e.serves(base, base) {
		return base
	}
	return e.Models[0]
}

// URL returns the endpoint's base URL: Address, or "http://" + ID.
func (e Endpoint) URL() string {
	if e.Address != "" {
		return strings.TrimRight(e.Address, "/")
	}
	return "http://" + e.ID
}
