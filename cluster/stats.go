package cluster

import (
	"sync/atomic"
)

// stats are the counters tests and benchmarks read (the metrics carry the same).
type stats struct {
	commands, published, publishedBytes, messages, dropped, applied, reads, deltas atomic.Int64
}

// Stats is a snapshot of a replica's counters.
type Stats struct {
	// Commands is the number of Redis commands sent.
	Commands int64
	// Published, PublishedBytes and Messages count the decisions shared,
	// their bytes and the messages that carried them.
	Published, PublishedBytes, Messages int64
	// Dropped counts decisions not shared (queue full or Redis error).
	Dropped int64
	// Applied counts peers' decisions applied to the index.
	Applied int64
	// Reads counts completed reads of the peers' records.
	Reads int64
	// Deltas counts this replica's load changes published (they travel in
	// the decision messages, so PublishedBytes includes them).
	Deltas int64
	// Degraded reports whether the replica routes on local state only.
	Degraded bool
}

// Stats returns the replica's counters.
func (r *Replica) Stats() Stats {
	return Stats{Commands: r.stats.commands.Load(), Published: r.stats.published.Load(),
		PublishedBytes: r.stats.publishedBytes.Load(), Messages: r.stats.messages.Load(),
		Dropped: r.stats.dropped.Load(), Applied: r.stats.applied.Load(), Reads: r.stats.reads.Load(), Deltas: r.stats.deltas.Load(), Degraded: r.Degraded()}
}
