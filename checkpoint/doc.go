// Package checkpoint keeps a kvroute index persistent across restarts and
// replicas: it restores the index when a router starts, writes it to a
// checkpoint file periodically and on shutdown, and serves it to peer
// replicas that bootstrap from it.
//
// vLLM announces a KV block only when it computes it and replays only its
// last batches, so a router that starts empty never learns the prefixes
// cached before the replay window. A router that starts from a snapshot —
// its own checkpoint file, or a live peer's index — knows them at once, and
// every KV-event stream resumes from the snapshot's positions (replay from
// the position, verify the payload digest, apply what follows).
//
// # Sources
//
// An IndexSource supplies the starting state: FileSource reads a checkpoint
// file, PeerSource a peer's snapshot handler over HTTP, ClusterPeerSource
// the live replicas of a router's Redis pool. Restore tries, in order, the
// pool's replicas (when Options.Cluster is enabled and no peers are
// configured), the configured peers (BootstrapConfig.Peers, raced: a peer
// that has not begun sending within the hedge delay has the next one asked
// too), the checkpoint file (Config.Path), then Options.Sources; the first
// that delivers a valid snapshot wins. Every snapshot is validated whole
// (format and key-scheme versions, block size, checksums, section bounds,
// the number of sections: BootstrapConfig.MaxSectionBytes and MaxEndpoints)
// before any of it is used: a bad one leaves the index empty, is logged and
// counted in kvroute_index_restore_total by result (a busy peer's 503 is
// "busy", and the peer is asked again after its Retry-After when no other
// is left; a pool whose Redis does not answer is "redis_unreachable", not
// "missing"), and a refused file is
// kept as <path>.rejected for inspection. The checkpoint path is one
// router's: Restore claims it (an advisory lock on <path>.lock, released by
// Close or the process's end) before reading it, and refuses a path another
// router holds with an error wrapping ErrPathInUse, since two routers on one
// file would restore and overwrite each other's index. A peer that sends nothing for
// BootstrapConfig.ProgressTimeout is abandoned; ending Restore's context
// abandons the whole restore. The hedge delay and the progress timeouts run
// on the Options' clock in Restore (an IndexSource's Load called directly
// runs them on the wall clock); BootstrapConfig.Timeout, a bound on the
// HTTP transfer, stays wall time.
//
// # Keeper
//
// Restore returns a Keeper. Start launches the periodic writer (every
// Config.Interval; the file is replaced atomically: a write that fails keeps
// the previous file, counted in kvroute_checkpoint_writes_total as error,
// and one whose directory sync fails after the rename leaves the new file in
// place, not durable until the directory is written back: counted as
// not_durable), Close writes the last checkpoint, Write writes one now,
// DropUnlisted clears restored endpoints that the first endpoint list does
// not name, and Handler serves the index to peers (GET; with
// BootstrapConfig.Token, a proof of the token bound to the URL asked and the
// time, never the token itself: see Handler). A serve holds
// one of 4 slots, so it is bounded: each write waits at most
// BootstrapConfig.ServeWriteTimeout for the peer, and the writes together
// at most that grace plus their bytes at BootstrapConfig.ServeMinRate,
// measured on the Options' clock (the per-write deadlines are socket
// deadlines, wall time).
//
// kvroute.New builds its Keeper from the "checkpoint" and "bootstrap"
// sections of its configuration (Config and BootstrapConfig here) and its
// Options.IndexSources; most hosts never call this package directly,
// except to name its types in a configuration. A host that fills an index
// of its own uses Restore and the Keeper directly.
package checkpoint
