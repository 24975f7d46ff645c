package kvevents

import (
	"fmt"
	"maps"
	"net"
	"strconv"

	"github.com/kvroute/kvroute/internal/zmqx"
)

// Default ports of an engine's KV-event sockets (vLLM's --kv-events-config
// endpoint and replay_endpoint as deployed by llm-d).
const (
	DefaultEventsPort = 5556
	DefaultReplayPort = 5559
)

// Endpoint is one inference engine (one data-parallel rank) whose KV events
// the Pool indexes.
type Endpoint struct {
	// ID is the ip:port of the engine's inference port. It names the
	// endpoint in the index and in metric labels (pod_identifier), and its
	// host is used for the default socket addresses. Required.
	ID string `json:"id"`
	// Model is the served base model, the root of the block-key chain. ""
	// takes the model from the message topic (kv@<ip:port>@<model>), then
	// PoolConfig.Model.
	Model string `json:"model,omitempty"`
	// EventsAddress is the engine's PUB socket ("tcp://host:port"); default
	// tcp://<ID host>:<PoolConfig.EventsPort + Rank>.
	EventsAddress string `json:"eventsAddress,omitempty"`
	// ReplayAddress is the engine's replay ROUTER socket. When empty it is
	// tcp://<ID host>:<PoolConfig.ReplayPort + Rank> if PoolConfig.Replay is
	// enabled, and the endpoint has no replay otherwise (gaps are then
	// counted and logged, not repaired).
	ReplayAddress string `json:"replayAddress,omitempty"`
	// Rank is the engine's data-parallel rank: vLLM offsets both socket
	// ports by it (spec/wire.md §1.5). Only used for default addresses.
	Rank int `json:"rank,omitempty"`
	// Labels are matched against PoolConfig.Selector.
	Labels map[string]string `json:"labels,omitempty"`
}

// resolve validates ep and fills in its default addresses.
func (ep Endpoint) resolve(cfg *PoolConfig) (Endpoint, error) {
	host, _, err := net.SplitHostPort(ep.ID)
	if err != nil || host == "" {
		return ep, fmt.Errorf("kvevents: endpoint ID %q is not ip:port", ep.ID)
	}
	if ep.Rank < 0 {
		return ep, fmt.Errorf("kvevents: endpoint %s: negative rank %d", ep.ID, ep.Rank)
	}
	if ep.EventsAddress == "" {
		ep.EventsAddress = "tcp://" + net.JoinHostPort(host, strconv.Itoa(cfg.EventsPort+ep.Rank))
	}
	if _, err := zmqx.Endpoint(ep.EventsAddress); err != nil {
		return ep, fmt.Errorf("kvevents: endpoint %s: events address: %w", ep.ID, err)
	}
	if ep.ReplayAddress == "" && cfg.Replay {
		ep.ReplayAddress = "tcp://" + net.JoinHostPort(host, strconv.Itoa(cfg.ReplayPort+ep.Rank))
	}
	if ep.ReplayAddress != "" {
		if _, err := zmqx.Endpoint(ep.ReplayAddress); err != nil {
			return ep, fmt.Errorf("kvevents: endpoint %s: replay address: %w", ep.ID, err)
		}
	}
	ep.Labels = maps.Clone(ep.Labels)
	return ep, nil
}

// sameStream reports whether a and b feed the index identically, so that
// Ensure can keep the running subscriber (only labels differ).
func (ep Endpoint) sameStream(o Endpoint) bool {
	return ep.ID == o.ID && ep.Model == o.Model && ep.EventsAddress == o.EventsAddress &&
		ep.ReplayAddress == o.ReplayAddress
}
