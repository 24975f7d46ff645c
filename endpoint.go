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
	// Rank is the engine's data-parallel rank: vLLM offsets both event ports
	// by it.
	Rank int `json:"rank,omitempty"`
	// Role is the endpoint's part in a prefill/decode-disaggregated
	// deployment: "prefill", "decode", or "" / "both" for an endpoint that
	// serves whole requests (package disagg names them and picks by them).
	// The router indexes every endpoint's KV events whatever its role; only
	// a Profile reads the role.
	Role string `json:"role,omitempty"`
}

// URL returns the endpoint's base URL: Address, or "http://" + ID.
func (e Endpoint) URL() string {
	if e.Address != "" {
		return strings.TrimRight(e.Address, "/")
	}
	return "http://" + e.ID
}
