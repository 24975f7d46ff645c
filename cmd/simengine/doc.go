// Command simengine is a simulated vLLM server for trying kvroute without GPUs:
// an OpenAI- and Anthropic-compatible HTTP API, vLLM's render routes, metrics
// and KV-cache events over ZeroMQ, backed by the engine model of the package
// simengine (a step scheduler over a paged KV cache with vLLM's prefix caching
// and block hashes) behind the HTTP server of simengine/server.
//
//	go run ./cmd/simengine --model m --port 8000 --enable-scale-out \
//	  --kv-events-config '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5556","replay_endpoint":"tcp://*:5559"}'
//
// The ports are the ones kvroute's gateway subscribes to by default
// (--events-port 5556, --replay-port 5559; kvevents.DefaultEventsPort and
// DefaultReplayPort), so an engine started this way is found without port
// flags. Flags follow vLLM's names where vLLM has them; see -help.
package main
