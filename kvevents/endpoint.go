package kvevents

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/kvroute/kvroute/internal/endpointid"
	"github.com/kvroute/kvroute/internal/zmqx"
)

// maxEngineBlockSize bounds an engine's block size in tokens, as
// configured (Endpoint.BlockSize) and as its stores name it (a larger
// block_size is skipped as invalid_block_size): far above any engine's, and
// a bound on what one engine block may expand to at the index's block size.
const maxEngineBlockSize = 1 << 16

// maxMappedTokens bounds the tokens one event's engine blocks cover when
// each maps to several router blocks (an engine block size above the
// index's): its block count times the engine's block size, as the wire
// decoder bounds an event's token_ids by default (wire.Limits'
// MaxTokensPerEvent). A store without tokens (tier-only, sliding window)
// or a removal is otherwise bounded only by its hash count: 2^20 hashes at
// a block size of 65536 and an index block size of 16 would be 2^32 router
// blocks. Such an event is skipped as too_many_tokens.
const maxMappedTokens = 1 << 24

// Default ports of an engine's KV-event sockets (vLLM's --kv-events-config
// endpoint and replay_endpoint as deployed by llm-d).
const (
	defaultEventsPort = 5556
	defaultReplayPort = 5559
)

// EngineKind says which engine publishes an endpoint's KV events, and so
// which of its sockets kvroute may use.
type EngineKind string

// Engine kinds.
const (
	// EngineVLLM: vLLM's ZmqEventPublisher, with a replay ROUTER when
	// configured (replay_endpoint). The default.
	EngineVLLM EngineKind = "vllm"
	// EngineSGLang: SGLang's publisher. Its replay ROUTER (the
	// replay_endpoint of its kv-events config, off unless set) answers in
	// the reply layout vLLM had before vllm#45177 (no topic frame), which
	// the replay client reads: an endpoint of this kind replays from an
	// explicit ReplayAddress. PoolConfig.Replay derives none for it, so an
	// SGLang fleet with replay on pool-wide produces no replay-connect
	// errors or failed replays, and it has no vLLM snapshot socket
	// (SGLang's snapshot-v1 protocol is another).
	EngineSGLang EngineKind = "sglang"
	// EngineNoReplay: a vLLM-compatible publisher whose replay is off.
	EngineNoReplay EngineKind = "noreplay"
	// EngineTRTLLM: TensorRT-LLM's KV-event publisher (its PyTorch
	// backend's streaming KV events), which speaks vLLM's framing,
	// sequences and current replay protocol (a ROUTER when replay_endpoint
	// is set) with its own map events (kvevents/wire, FormatTRTLLM). It has
	// no render endpoint: prompts are rendered by a vLLM render pool.
	EngineTRTLLM EngineKind = "trtllm"
)

func (k EngineKind) validate() error {
	switch k {
	case "", EngineVLLM, EngineSGLang, EngineNoReplay, EngineTRTLLM:
		return nil
	}
	return fmt.Errorf("unknown engine %q (want vllm, sglang, trtllm or noreplay)", string(k))
}

// replays reports whether endpoints of this kind may have a replay socket.
func (k EngineKind) replays() bool { return k != EngineNoReplay }

// vllmSockets reports whether endpoints of this kind get the replay and
// snapshot addresses PoolConfig.Replay and PoolConfig.Snapshot derive:
// vLLM's and TensorRT-LLM's, which speak vLLM's protocols on those ports.
func (k EngineKind) vllmSockets() bool { return k == "" || k == EngineVLLM || k == EngineTRTLLM }

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
	// Models are further models the endpoint serves (an engine serving
	// several, or a served-model alias with its own topic). A message whose
	// topic names one of them is indexed under that model instead of Model,
	// so an endpoint serving two models keeps both in the index; a topic
	// naming a model outside Model and Models is indexed under Model and
	// counted in kvroute_kv_events_topic_model_unknown_total. Used only
	// with Model set.
	Models []string `json:"models,omitempty"`
	// EventsAddress is the engine's PUB socket ("tcp://host:port"); default
	// tcp://<ID host>:<PoolConfig.EventsPort + Rank>.
	EventsAddress string `json:"eventsAddress,omitempty"`
	// ReplayAddress is the engine's replay ROUTER socket. When empty it is
	// tcp://<ID host>:<PoolConfig.ReplayPort + Rank> if PoolConfig.Replay is
	// enabled and Engine is vLLM's or TensorRT-LLM's (an "sglang" endpoint
	// replays only from an explicit address, a "noreplay" one never), and
	// the endpoint has no replay otherwise (gaps are then counted and
	// logged, not repaired).
	ReplayAddress string `json:"replayAddress,omitempty"`
	// SnapshotAddress is the engine's snapshot ROUTER socket (vLLM's
	// kv-events-config snapshot_endpoint). When empty it is
	// tcp://<ID host>:<PoolConfig.Snapshot.Port + Rank> if
	// PoolConfig.Snapshot.Enabled, and the endpoint loads no snapshots
	// otherwise.
	SnapshotAddress string `json:"snapshotAddress,omitempty"`
	// Engine is the engine kind (default PoolConfig.Engine, itself "vllm").
	// "noreplay" endpoints never replay (a ReplayAddress is an error), and
	// "sglang" ones only from an explicit ReplayAddress: PoolConfig.Replay
	// gives neither a default address, and without one gaps are counted
	// and logged only.
	Engine EngineKind `json:"engine,omitempty"`
	// Rank is the engine's data-parallel rank: vLLM offsets its socket
	// TCP ports by it (rank r publishes on port+r, replays on
	// replayPort+r), and kvroute offsets the snapshot port the same way.
	// Only used for default addresses.
	Rank int `json:"rank,omitempty"`
	// Labels are matched by Options.Matcher.
	Labels map[string]string `json:"labels,omitempty"`
	// BlockSize is the engine's block size in tokens (vLLM --block-size),
	// when it differs from the index's: the Applier learns it from the
	// engine's stores, and uses this value for removals, and to round the
	// endpoint's matches down to whole engine blocks, before the first
	// store (a stream resumed from a checkpoint). 0 = learn it only.
	BlockSize int `json:"blockSize,omitempty"`
}

// resolve validates ep and fills in its default addresses. The ID is the
// pod_identifier label value of the endpoint's series, so it is held to
// endpointid.MaxBytes of UTF-8 before anything else.
func (ep Endpoint) resolve(cfg *PoolConfig) (Endpoint, error) {
	if err := endpointid.Check(ep.ID); err != nil {
		return ep, fmt.Errorf("kvevents: %w", err)
	}
	host, _, err := net.SplitHostPort(ep.ID)
	if err != nil || host == "" {
		return ep, fmt.Errorf("kvevents: endpoint ID %q is not ip:port", ep.ID)
	}
	if ep.Rank < 0 {
		return ep, fmt.Errorf("kvevents: endpoint %s: negative rank %d", ep.ID, ep.Rank)
	}
	if err := ep.Engine.validate(); err != nil {
		return ep, fmt.Errorf("kvevents: endpoint %s: %w", ep.ID, err)
	}
	if ep.Engine == "" {
		ep.Engine = cfg.Engine
	}
	if !ep.Engine.replays() && ep.ReplayAddress != "" {
		return ep, fmt.Errorf("kvevents: endpoint %s: engine %s has no replay socket, but replayAddress is %q",
			ep.ID, ep.Engine, ep.ReplayAddress)
	}
	from := ""
	if ep.EventsAddress == "" {
		ep.EventsAddress, from = derivedAddress(host, cfg.EventsPort, ep.Rank)
	}
	if _, err := zmqx.Endpoint(ep.EventsAddress); err != nil {
		return ep, fmt.Errorf("kvevents: endpoint %s: events address%s: %w", ep.ID, from, err)
	}
	from = ""
	if ep.ReplayAddress == "" {
		ep.ReplayAddress, from = ep.derivedReplay(cfg, host)
	}
	if ep.ReplayAddress != "" {
		if _, err := zmqx.Endpoint(ep.ReplayAddress); err != nil {
			return ep, fmt.Errorf("kvevents: endpoint %s: replay address%s: %w", ep.ID, from, err)
		}
	}
	if ep.BlockSize < 0 || ep.BlockSize > maxEngineBlockSize {
		return ep, fmt.Errorf("kvevents: endpoint %s: blockSize %d not in [0, 65536]", ep.ID, ep.BlockSize)
	}
	if err := ep.resolveSnapshot(cfg, host); err != nil {
		return ep, err
	}
	ep.Labels = maps.Clone(ep.Labels)
	ep.Models = slices.Clone(ep.Models)
	return ep, nil
}

// sameStream reports whether a and b feed the index identically, so that
// Ensure can keep the running subscriber (only labels differ).
func (ep Endpoint) sameStream(o Endpoint) bool {
	return ep.ID == o.ID && ep.Model == o.Model && slices.Equal(ep.Models, o.Models) && ep.EventsAddress == o.EventsAddress &&
		ep.ReplayAddress == o.ReplayAddress && ep.Engine == o.Engine && ep.BlockSize == o.BlockSize &&
		ep.SnapshotAddress == o.SnapshotAddress
}

// derivedReplay is the replay address PoolConfig.Replay gives ep, on host,
// when it names none (with derivedAddress's words): port ReplayPort + Rank
// for the engine kinds whose replay socket sits there by vLLM's layout;
// none ("") without Replay or for another kind (an SGLang engine replays
// only from an address it is given, a "noreplay" one never).
func (ep Endpoint) derivedReplay(cfg *PoolConfig, host string) (addr, from string) {
	if !cfg.Replay || !ep.Engine.vllmSockets() {
		return "", ""
	}
	return derivedAddress(host, cfg.ReplayPort, ep.Rank)
}

// derivedAddress is the socket address an engine's data-parallel rank
// listens on, port + rank on host, and the words an error about it adds
// (" derived from port P + rank R"), so that an operator sees which rank
// pushed a port out of range.
func derivedAddress(host string, port, rank int) (addr, from string) {
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(port+rank)), fmt.Sprintf(" derived from port %d + rank %d", port, rank)
}
