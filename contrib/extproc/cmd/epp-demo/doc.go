// Command epp-demo runs kvroute's endpoint picker the way an Envoy gateway
// uses it, end to end on one machine: two simulated vLLM engines (render
// routes, KV events with replay), the ext_proc picker on a loopback gRPC
// port, and envoysim — a proxy that behaves as Envoy's ext_proc filter does —
// in front. It sends a burst of requests sharing a long system prompt through
// the proxy and prints which engine served each one: the burst stays on the
// engine that cached the shared prompt first.
//
//	go run ./contrib/extproc/cmd/epp-demo
//
// Envoy itself is not needed (nor installable where kvroute is tested);
// envoysim sends the picker the same message sequence.
package main
