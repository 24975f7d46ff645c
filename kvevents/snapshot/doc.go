// Package snapshot loads an engine's whole KV-cache state from vLLM's
// snapshot socket, so a router that joins mid-stream, sees its engine
// restart, or misses more than the replay buffer holds can rebuild the
// engine's index entries instead of only the replay window.
//
// protocol.go is the wire protocol (the one file to change when vLLM's
// changes); Client fetches a snapshot with a per-attempt deadline (the
// socket's, wall time) and an overall one (on Options.Clock, with the
// backoff between attempts, as a replay's), a byte cap enforced before
// anything is allocated, retries while the engine answers "unavailable",
// and a process-wide bound on concurrent loads (Limiter). Server answers
// snapshot requests for kvroute's simulated engine with the same
// protocol, counting what it answered, ignored and refused (Stats, and
// kvroute_snapshot_server_* metrics with a Registerer). Applying the
// chunks to the index is the KV-event stream's job (package kvevents).
package snapshot
