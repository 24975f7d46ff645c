// Package clusterseam is the seam between package cluster and Redis, so
// that one caller other than Redis can stand in: the deterministic,
// virtual-clock routing simulation (bench/internal/sim), which runs several
// kvroute Routers as active-active replicas sharing their state through the
// real cluster code with an in-process, virtual-time store instead of a
// redis-server. Nothing outside this module can reach it (it is internal),
// and nothing else uses it: production replicas and every test of package
// cluster talk to a real Redis.
//
// Store is exactly the Redis operations package cluster performs (a
// leased record per replica, a member set, one multi-key read, and publish
// of decision messages); its Redis implementation lives in package cluster.
// Manual is a cluster replica without goroutines, driven step by step
// (refresh, read, flush, apply) by a caller that owns the clock.
// NewManual and AttachManual are filled in by package cluster and the root
// kvroute package when they are initialised; a caller outside those
// packages must import both (the root package imports cluster).
package clusterseam
