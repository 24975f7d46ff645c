// Package zmqpub is the engine side of vLLM's KV-event transport, in Go: a
// PUB socket sending [topic, sequence, payload] with sequences from 0 and an
// optional replay ROUTER over a ring of recent batches, with bounded memory
// (one bounded queue and writer goroutine per subscriber) and a Close that
// stops every goroutine.
//
// It is internal so that both the public kvevents/publish package (which
// adds the batch encoding of kvevents) and the tests of kvevents itself,
// which cannot import a package that imports kvevents, use the same
// publisher.
//
// Metrics (kvroute_publisher_*, and the replay server's when replay is on):
// A nil Registerer registers nothing. New registers every collector of the
// component through Set.Register, all or none (New fails and leaves nothing
// registered). Close unregisters exactly what New registered, so a closed
// component can be built again on the same registry.
package zmqpub
