// Command simengine is a simulated vLLM server for trying kvroute without GPUs:
// an OpenAI- and Anthropic-compatible HTTP API, vLLM's render routes, metrics
// and KV-cache events over ZeroMQ, backed by the engine model of the package
// simengine (a step scheduler over a paged KV cache with vLLM's prefix caching
// and block hashes) behind the HTTP server of simengine/server.
//
//	go run ./cmd/simengine --model m --port 8000 --enable-scale-out \
//	  --kv-events-config '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558"}'
//
// Flags follow vLLM's names where vLLM has them; see -help.
package main
