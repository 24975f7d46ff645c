package kvevents

// source is where a pool's live messages come from, and so what its
// streams are created by: a dialer (the default, per-endpoint mode) dials
// each endpoint's PUB with its own supervised SUB socket; a binder (bind
// mode, PoolConfig.BindAddress) binds one socket per data-parallel rank,
// engines connect to it, and a message's endpoint comes from its topic.
// Either way every stream is in Pool.streams, and the rest of the pool
// (Status, Position, Resync, Endpoints, Close) never asks which source it
// has.
//
// The Locked methods run with Pool.mu held (and Pool.opMu, which
// serialises them); the function they return runs after Pool.mu is
// released, to stop or start what must not run under it.
type source interface {
	// ensureLocked registers ep, whose labels match Options.Matcher or not
	// (then it is treated like a removal). pos, from EnsureFrom, is where
	// the endpoint's next new stream starts.
	ensureLocked(ep Endpoint, match bool, pos *Position) (after func())
	// removeLocked forgets the endpoint; after closes its stream and
	// clears its entries.
	removeLocked(id string) (after func())
	// close stops the source's sockets once the pool's context is
	// cancelled; no stream is created after it returns. The pool then
	// closes the streams.
	close()
	// addrs returns the bound addresses, one per rank ("" when not bound
	// yet); nil for a source that binds nothing.
	addrs() []string
}
