// Package replay asks a KV-event publisher for the batches a subscriber
// missed, and serves such requests for Go publishers and tests.
//
// vLLM keeps the last batches it published (10,000 by default) and answers
// replay requests on a ROUTER socket: a request is [empty delimiter, start
// sequence as 8 bytes big-endian]; the reply is one message per buffered batch
// with a sequence at or after the start, then an END sentinel whose sequence
// is ff×8 and whose payload is empty. vLLM releases before vllm#45177 (and
// SGLang) reply [seq, payload]; later ones put the topic first
// ([topic, seq, payload]).
//
// Client replays over a fresh DEALER per attempt (never REQ, never a fixed
// identity), accepts both reply layouts, bounds every attempt by an idle
// deadline (2 s, re-armed by incoming data) and the whole replay by an end to
// end deadline (2 min), resumes after an interruption from the next sequence
// it expects, gives up after 3 attempts without progress, and shares a
// process-wide Limiter (8 concurrent replays by default). Failures are *Error
// values whose Op is the operation label of the
// llm_d_epp_kv_cache_events_zmq_errors_total metric.
//
// Buffer is a ring of the last batches a Go publisher sent, and Server answers
// replay requests from it in either layout.
package replay
