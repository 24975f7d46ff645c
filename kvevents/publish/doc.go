// Package publish is the engine side of KV events, for engines written in Go,
// simulated engines and tests: a Publisher speaks vLLM's ZeroMQ protocol
// exactly as a kvevents.Pool (or llm-d, or any libzmq SUB) expects it from a
// real vLLM.
//
// Messages are [topic, sequence, payload]: the topic kv@<ip:port>@<model> (or
// one given verbatim, "" being vLLM's default), the sequence as 8 bytes
// big-endian counting from 0, and one msgpack KVEventBatch that PublishBatch
// encodes with wire.AppendBatch in the configured wire.Format (byte
// for byte what vLLM's msgspec encoder writes). With a ReplayAddr the
// Publisher also serves replay requests from a ring of its recent batches, in
// either reply layout of the replay package, so a subscriber that missed
// batches repairs its index.
//
// Memory is bounded: each subscriber gets a queue of SendQueue messages, and a
// message for a full queue is dropped and counted (as a libzmq PUB does at its
// high-water mark), so Publish never blocks on a slow subscriber. Close stops
// every goroutine. go-zeromq's own PUB socket is not used because its queue is
// unbounded and its writer goroutine outlives Close.
//
// The package is separate from kvevents because a router never publishes:
// only an engine-side program needs it.
package publish
