package kvevents

import (
	"fmt"

	"github.com/kvroute/kvroute/internal/zmqx"

	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// defaultSnapshotPort is the port of an engine's snapshot ROUTER when
// SnapshotConfig.Enabled gives endpoints a default address (offset by the
// data-parallel rank, as vLLM offsets every KV-event socket). vLLM has no
// fixed default; llm-d's podDiscoveryConfig.snapshotSocketPort sets it.
const defaultSnapshotPort = 5560

// SnapshotConfig turns on loading an engine's whole KV-cache state from
// vLLM's snapshot socket (its kv-events-config snapshot_endpoint) where a
// replay from the engine's buffer cannot rebuild the endpoint: joining a
// stream mid-way, after an engine restart, and when the replay buffer no
// longer holds a gap. Off by default: the protocol is experimental upstream
// (vllm-project/vllm#57789). In a kvroute.Config this is events.snapshot.
type SnapshotConfig struct {
	// Enabled gives every vLLM endpoint without a SnapshotAddress the
	// default tcp://<ID host>:<Port + Rank>. An endpoint naming a
	// SnapshotAddress uses it whatever Enabled says.
	Enabled bool `json:"enabled"`
	// Port is the snapshot ROUTER's port for default addresses (default
	// 5560; llm-d: podDiscoveryConfig.snapshotSocketPort).
	Port int `json:"port"`
	// Client bounds each load: deadlines per attempt and overall, the pause
	// after an "unavailable" answer, and the byte cap of one snapshot. Its
	// Limiter (at most 4 loads at once) is shared by the process.
	Client snapshot.ClientConfig `json:"client"`
}

func (c SnapshotConfig) validate() error {
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("kvevents: pool config: snapshot.port %d out of range", c.Port)
	}
	if err := c.Client.Validate(); err != nil {
		return fmt.Errorf("kvevents: pool config: snapshot.client: %w", err)
	}
	return nil
}

func (c SnapshotConfig) withDefaults() SnapshotConfig {
	if c.Port == 0 {
		c.Port = defaultSnapshotPort
	}
	return c
}

// resolveSnapshot fills in and checks ep's snapshot address.
func (ep *Endpoint) resolveSnapshot(cfg *PoolConfig, host string) error {
	if !ep.Engine.vllmSockets() && ep.SnapshotAddress != "" {
		return fmt.Errorf("kvevents: endpoint %s: engine %s has no vLLM snapshot socket, but snapshotAddress is %q",
			ep.ID, ep.Engine, ep.SnapshotAddress)
	}
	from := ""
	if ep.SnapshotAddress == "" && cfg.Snapshot.Enabled && ep.Engine.vllmSockets() {
		ep.SnapshotAddress, from = derivedAddress(host, cfg.Snapshot.Port, ep.Rank)
	}
	if ep.SnapshotAddress != "" {
		if _, err := zmqx.Endpoint(ep.SnapshotAddress); err != nil {
			return fmt.Errorf("kvevents: endpoint %s: snapshot address%s: %w", ep.ID, from, err)
		}
	}
	return nil
}
