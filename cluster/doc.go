// Package cluster runs kvroute routers as active-active replicas that share
// their state through Redis (or Valkey, which speaks the same protocol), so
// that two replicas behind one load balancer route as one router would.
//
// # Shared in-flight load
//
// Every replica keeps exact local accounting in its tokenload.Tracker. A
// Replica publishes those local per-endpoint totals every RefreshPeriod as
// its record, a key with a TTL of Lease (the replica's lease), and reads the
// other replicas' records every ReadPeriod; the sum of the live peers' loads
// is stored in the tracker (SetPeerLoads), whose Load then reports local +
// peers. The request path reads memory only: no Redis round trip, no
// allocation. A replica that dies stops refreshing; its record expires with
// its lease and its load leaves every peer's view at their next read, so no
// load leaks and no decrement has to arrive. While Redis is healthy a peer's
// load change is visible here within StalenessBound = RefreshPeriod +
// ReadPeriod + 2 × OpTimeout: 1.5 s with the defaults (250 ms, 250 ms,
// 500 ms), about 500 ms in practice since a round trip takes well under a
// millisecond on a local network; the gauge
// kvroute_cluster_staleness_bound_seconds reports it. A dead peer's load goes
// within Lease + ReadPeriod of its last refresh (3.25 s with the defaults).
//
// Between records, every change of a replica's own load (a dispatch adds its
// uncached tokens and one request, a first chunk releases the tokens, the
// end of a request releases what is left) is numbered with the replica's
// load sequence and sent at once, in a decision message that does not wait
// out PublishInterval (the decisions queued meanwhile ride along), so the
// peers apply it within one round trip through Redis rather than
// StalenessBound. Not batching them matters: a peer that has not heard of a
// dispatch sees the endpoint idler than it is and sends its own new
// requests there too, so the replicas herd onto one endpoint for as long as
// the change travels (the routing simulation's replica report measures it:
// bench/results/routesim-replicas.md). While one message is in flight the
// changes queued meanwhile wait for it, so a busy replica sends at most one
// message per round trip. Each record carries the sequence number up to which its
// totals include the changes; a peer discards the changes at or below it and
// keeps the later ones on top, so a lost message is healed by the next
// record and a dead replica's load, changes included, still goes with its
// lease. A change still above a peer's live record 2 × Lease after it
// arrived, which a record sent since would include, is numbered beyond
// anything that peer's records reach (a forged or broken sender): it is
// dropped and counted (reason stale) rather than kept on top of the
// peer's load for as long as the peer lives.
// The sequence starts at the replica's start time in microseconds, so
// a restarted replica's changes and records supersede its previous life's
// (on a clock behind its previous life's numbers, its first record does: a
// record numbered below the last one read drops the changes pending here).
// The peers' pending changes are bounded by MaxPendingDeltaBytes (4 MiB):
// beyond it a change is dropped, counted, and that peer is seen by its
// records alone until the next one; a peer within its fair share of the
// bound evicts (and counts) the changes of the peer most over its share
// instead, so that one replica's flood does not shut out the others'. A change costs its endpoint's length +
// 3 to 5 bytes on the wire; the sender's queue of changes (DeltaQueue, 1,024)
// is preallocated, so the request path still does not allocate.
//
// # Shared admission queue depth
//
// With ShareQueues (package admission's Controller.ShareQueues calls it), a
// replica's record also carries its admission queue depth per priority
// band, and every read sums the live peers' depths (PeerQueues), so each
// replica knows how many requests wait in the whole fleet, with the same
// staleness as the load records and no Redis command of its own. The depths
// are an optional last section of the record, written only while requests
// wait: a replica of an older version, which rejects the section, reads a
// newer replica's record again as soon as its queues are empty. Only the
// bands given to ShareQueues are taken from a peer, each bounded. A record
// carries at most 64 bands with requests waiting, highest priority first,
// with priorities within ±2^31; the replica's other bands are left out of
// its peers' sums and counted at every refresh
// (kvroute_cluster_record_queue_bands_dropped_total{reason}).
//
// # Shared routing decisions
//
// Publish queues a decision (the chosen endpoint and the request's leading
// block keys) without blocking or allocating; a background goroutine sends
// the decisions queued within PublishInterval (5 ms) as one compact binary
// pub/sub message, and every other replica turns each decision into
// speculative index entries, as its own decision would. Two replicas routing
// one new prefix at once therefore keep it on one endpoint. A decision costs
// 2 + endpoint length + 8 bytes per block key, plus the message header
// shared by a batch (a 2,048-token prompt at block size 64, 32 keys:
// about 280 bytes). The queue is bounded and preallocated (DecisionQueue,
// double-buffered: 2 × DecisionQueue × MaxKeysPerDecision × 8 bytes, 1 MiB
// with the defaults); a full queue, a failed publish or a degraded replica
// drops decisions and counts them. A batch larger than 256 KiB, of
// decisions or of load changes, goes as several messages, in order, the
// load changes numbered on from one message to the next; none is over
// 1 MiB, the bound every receiver checks (Validate keeps
// MaxKeysPerDecision within it; a decision or change that fits no message,
// which takes an endpoint name of about 1 MiB, is dropped and counted as
// too_large).
//
// # Shared session affinity
//
// With ShareSessions (package session's Affinity.Share calls it), each
// session record PublishSession queues (a session key's 64-bit hash and the
// endpoint of its latest turn) is sent with the decisions, as a session
// message on the same channel, and every other replica hands the records to
// its session store, dated by their age; sessions.go gives the format and
// its checks. Nothing of it runs on the request path but the queueing.
//
// # Membership
//
// A record also names the replica's snapshot URL; the pool's member set lists
// replica IDs, pruned of members whose lease expired. Peers (and
// SnapshotURLs) lists the live peers, so a new replica can bootstrap its
// index from one of them; New reads them once before returning.
//
// A replica that stops without leaving (a crash, a partition) keeps its ID
// in the set until a read finds its record gone: while another replica of
// the pool runs and reaches Redis, its first read after the lease expired
// removes it, within Lease + ReadPeriod + OpTimeout of the last refresh.
// Every refresh also gives the set itself a TTL of Lease, so when no
// replica is left the set goes by itself a lease after the pool's last
// refresh, and the IDs of a pool that is gone do not stay in Redis. A
// single ID cannot expire by itself: a Redis set has no per-member TTL
// (hash fields have one from Redis 7.4, which this package does not
// require), and the records' own leased keys could be listed only by
// scanning the server's whole keyspace. A pool's replicas share Lease, as
// judging their records fresh already asks: one whose RefreshPeriod
// exceeded another's Lease could be missing from the set for a moment
// after that one's last refresh.
//
// # What is read from Redis is checked
//
// Anyone who can write to the Redis server can write a pool's keys, so a
// replica takes nothing from them on trust. It accepts endpoint names only
// from its own endpoint set (SetEndpoints; a Router passes the endpoints
// given to its SetEndpoints, and accepts none before): a peer record's
// load, a load change or a routing decision naming another endpoint is
// dropped and counted in kvroute_cluster_endpoints_dropped_total (reason
// unknown_endpoint, or invalid_name for a name that is empty, over 1,024
// bytes or not UTF-8 and so could never be a label value). The load
// tracker and the index therefore never hold more endpoints than the
// replica was given, whatever is in Redis. A decision with no block keys, which
// no replica publishes, and one under this replica's own ID in a message not
// headed as it heads its own (its echoes are skipped uncounted), are dropped
// and counted in kvroute_cluster_decisions_dropped_total (reason no_keys,
// own_sender); a load change under this replica's own ID in such a message,
// in kvroute_cluster_load_changes_dropped_total (own_sender). A record whose send time is more than a lease from now is not a
// live peer whatever its key's TTL (a record written without one would
// otherwise count forever), and is counted in
// kvroute_cluster_stale_records_total at every read; replicas' clocks must
// agree within a fraction of the lease, as NTP keeps them. Such a record's
// replica stays in the member set (only a record gone takes it out), so that a
// replica whose clock is off ignores its peers but does not unlist them for
// everyone else. A member-set entry
// that is no replica ID, or a snapshot URL that is no http(s) URL, is
// ignored and counted in kvroute_cluster_invalid_records_total. A read
// whose MGET returns another number of values than it asked for (a broken
// server or proxy) fails as an unanswered one does. Memory
// stays bounded per replica: MaxPeers records of at most 1 MiB per read,
// MaxPendingDeltaBytes of pending load changes, MaxPeers senders.
//
// The Redis client reads a reply whole, whatever size the server announces
// (Redis takes values up to 512 MiB), before any of these checks, so the
// replica's connections read through a bounder that follows the RESP
// stream as it arrives and refuses what exceeds what kvroute writes before
// the client allocates it, counting each refusal in
// kvroute_cluster_redis_replies_refused_total by reason. A string over
// 1 MiB + 64 KiB (a record or a decision message is at most 1 MiB) is
// discarded as its bytes arrive and read as the empty string
// (string_too_long): it is then an invalid record or message like any
// other, and the rest of the read, the other peers' records, goes on, as
// does the subscription. Anything else over its bound (line_too_long;
// too_many_elements: an aggregate over 65,536 elements, or 8 × MaxPeers
// if more; nested_too_deep: over 16 levels; reply_too_large: a reply over
// an MGET of MaxPeers such records plus 8 MiB; malformed) drops the
// connection: the command fails (a read puts the replica in degraded
// mode) and the next one dials again. With Options.Client, the bounded
// client is the replica's own, built from the given client's options (see
// Options).
//
// # Faults
//
// A failed or timed-out refresh or read (OpTimeout bounds each) puts the
// replica in degraded mode: the peers' load is dropped and routing goes on
// with local state only, the failure is counted, logged once per outage and
// kvroute_cluster_degraded is 1. The loops keep trying every period; the
// outage ends, restoring the shared state and the gauge, once each kind
// of operation that failed during it has succeeded again: a read after a
// failed read, a refresh (a write) after a failed refresh. A Redis that
// answers reads but refuses writes (a read-only replica, maxmemory
// reached) therefore keeps the replica degraded, one outage, rather than
// flapping between degraded and healthy at every read. Redis being slow
// or away never blocks Pick: only the background goroutines wait on it.
// The decision subscription, quiet for 2 × Lease, is pinged; a ping
// that gets no answer within OpTimeout means a connection dead without
// closing (a partition, a failover behind a NAT or a service IP, which
// go-redis does not notice): it is closed and the subscription opened
// again, counted in kvroute_cluster_redis_errors_total{op="subscribe"}.
// So is a subscription that delivers a reply of the wrong shape (an
// empty array, a count that is no integer: a broken server or proxy),
// on which go-redis panics; the panic is recovered, not let end the
// process.
//
// A record carries the loads of at most MaxEndpoints loaded endpoints, and
// only as many as fit the 1 MiB every peer accepts; each loaded endpoint
// left out is counted, at every refresh, in
// kvroute_cluster_record_loads_dropped_total (reason max_endpoints or
// record_size).
//
// # Keys and Redis Cluster
//
// All names of a pool carry the pool as a hash tag, so they hash to one Redis
// Cluster slot and the multi-key read (MGET of the peers' records) stays on
// one node:
//
//	kvroute:{<pool>}:replicas         SET of replica IDs, TTL = lease (renewed by every refresh)
//	kvroute:{<pool>}:replica:<id>     the replica's record, TTL = lease
//	kvroute:{<pool>}:decisions        pub/sub channel of decisions
//
// Several pools spread over the cluster's slots. Give several Addrs (or
// ClusterMode) to use the Redis Cluster protocol; with ShardedPubSub the
// decisions use SPUBLISH/SSUBSCRIBE and stay within the pool's shard instead
// of being broadcast to every node.
//
// # Redis operations
//
// Per replica: 3 commands per refresh (SET with PX, SADD, PEXPIRE of the
// member set, pipelined), 1-3 per read (SSCAN of the member set, which
// returns a pool's small set whole as SMEMBERS would but stops at 4 ×
// MaxPeers IDs; MGET; SREM of expired members), and one PUBLISH per
// PublishInterval with decisions alone, or one per load change (a dispatch,
// a first chunk, an end), at most one per round trip while they come faster.
// With the defaults that is about 20 commands/s plus, at 1,000 requests/s,
// up to about 3,000 PUBLISH/s, bounded by the publisher's round trip to
// Redis (BenchmarkRedisOpsAt1000RPS measures it).
//
// go-redis reports connection failures through its own process-wide logger
// (redis.SetLogger), several unstructured lines on standard error per Redis
// start or stop. New routes them into the replica's logger as Debug records
// ("go-redis", with the line as "detail"), so that at Info level an outage
// is this package's one line when it starts and one when it ends; a host
// that wants go-redis's lines elsewhere calls redis.SetLogger after New.
//
// # Dependency
//
// The Redis client is github.com/redis/go-redis/v9: the client the llm-d
// router already uses, maintained by Redis, it speaks RESP2/3 to standalone
// servers, Sentinel and Redis Cluster through one UniversalClient interface
// (so the same code serves a single server and a cluster), pipelines, and
// reconnects and resubscribes pub/sub connections by itself. Writing a client
// of our own would mean re-implementing cluster slot routing and pub/sub
// reconnection.
//
// # Metrics registration
//
// A nil Registerer registers nothing. New (and NewManual) registers every
// collector of the replica through telemetry.Set.Register, all or none (it
// fails and leaves nothing registered), and Close unregisters exactly what
// it registered, so a closed replica can be built again on the same
// registry.
package cluster
