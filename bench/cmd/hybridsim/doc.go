// Command hybridsim runs kvroute's routing simulation (bench/internal/sim)
// on a fleet of hybrid-attention engines (a sliding-window group and a
// Mamba group beside full attention, all allocating from the engine's one
// block pool, -pools sizes it, as vLLM's groups share one) and reports
// how far the cached tokens kvroute's index predicts on the endpoint it
// picks are from those the engine serves: once with the groups' events
// dropped before the index (kvroute before it tracked the groups), once
// with them. It writes a Markdown table to -out (stdout when empty).
package main
