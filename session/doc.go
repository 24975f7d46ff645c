// Package session is session affinity for kvroute routers: the turns of one
// conversation or agent loop prefer the endpoint that served the session's
// last turn, even before the engine's KV events say it holds the
// conversation, and when a turn's new tokens outweigh its cached prefix.
//
// # Session key
//
// A request's session key is, in order: Request.Session when the host set
// it (counted as kvroute_session_keys_total{source="host"}); the first well-formed value of Config.Headers (default x-session-id,
// Dynamo's x-dynamo-session-id and SGLang's gateway's x-smg-routing-key);
// the value of Config.Cookie (default llm-d-session, the cookie llm-d's
// session-affinity scorer sets); and, with Config.Derive (opt-in), a key
// derived from the body: the block key of the conversation's opening (the
// system prompt and the messages up to and including the first user
// message, which every later turn repeats), as the Router computes block
// keys, the opening rendered once per conversation through the Router's
// own stages (derive.go). A header or cookie value longer than
// Config.MaxKeyBytes (256) or holding a byte outside visible ASCII is
// malformed: it is skipped and counted
// (kvroute_session_keys_total{source="invalid"}) and the request routed
// without it, or, with Config.Strict, the request is refused with
// ErrInvalidKey (the gateway and the ext_proc picker answer 400).
//
// # Session cookie
//
// With Config.SetCookie (on by default when a cookie is read) the host
// answers a request that had no session key, none sent and (with
// Config.Derive) none derived, with llm-d's cookie,
// llm-d-session=<standard base64 of the endpoint's ID>; Path=/; HttpOnly;
// SameSite=Lax (ResponseCookie), so that a client that keeps cookies
// sticks with no header. A cookie that names one of the candidates is a
// pointer to it: no store entry, valid on every replica and after a
// restart; when the session moves (its endpoint saturated) the response
// sets the cookie again, naming the new endpoint, as llm-d does. Any other
// cookie value (llm-d's names a pod, namespace/name) is an opaque key.
// A request keyed by Config.Derive gets no cookie: its derived key keeps
// each conversation on its own endpoint, and a cookie (one per client,
// read before derivation) would key all of a client's conversations alike
// from their next turn on.
//
// # Scorer and store
//
// The store maps the key's 64-bit hash to the endpoint chosen for the
// session's last turn, with the time it was chosen: an entry expires TTL
// (10 minutes) after its last turn, and at most MaxEntries (262,144, at
// most EntryBytes = 104 bytes each) are held. The store is split into
// shards by the key's hash (16 from 16,384 entries, as by default; fewer
// below, one below 2,048), each holding its share of MaxEntries (the
// shares sum to it): a new session in a full shard forgets that shard's
// least recently routed session (counted), which is the least recently
// routed overall only with one shard. Time is the injected clock's
// (telemetry.Set), read as the time elapsed since New: on the wall clock
// that is its monotonic reading, so a step of the wall clock (NTP)
// neither ages nor rejuvenates an entry, and a session's new turn
// replaces its entry whatever the clock reads. There is no background
// goroutine: expired entries go when looked up or when a new session
// needs room.
//
// The scorer (Affinity.Scorer, for kvroute.Options.Scorers) gives the
// session's endpoint its headroom below Config.SaturationTokens, 1 −
// load/SaturationTokens, and every other candidate 0. Added to the
// router's token-load score, the session stays while its endpoint is not
// much busier than the others and is left when the endpoint saturates
// (its session score is then 0). It is a preference, not a filter: llm-d's
// scorer gives its endpoint a flat 1 and Dynamo pins a session to its
// worker while its TTL lasts; kvroute weighs the session against load.
//
// The profile (Affinity.Profile, for kvroute.Options.Profile, wrapping any
// other profile) keys each request, sets Request.Session, and records the
// committed decision's endpoint as the session's; hosts that run the
// Selection stages themselves call Key and Record. Without a session key
// nothing is looked up and nothing allocates.
//
// # Replicas
//
// Share(replica) shares the store with the other replicas of a cluster
// pool the way routing decisions are: each record is queued (no Redis call
// on the request path) and published with the decisions; peers' records
// are checked (their endpoint must be one of the replica's own) and stored
// as of their age; one older than the TTL is counted as expired and not
// stored. Only the key's hash travels.
//
// # Metrics
//
//	kvroute_session_lookups_total{outcome}   hit, moved, miss, expired
//	kvroute_session_keys_total{source}       header, cookie, derived, host, none, invalid
//	kvroute_session_expired_total            entries removed past their TTL, peers' records past it
//	kvroute_session_evicted_total            entries forgotten for room
//	kvroute_session_peer_records_total{outcome}   peers' records: learned, superseded (the store held a later turn), expired
//	kvroute_session_cookies_set_total        responses that set the session cookie
//	kvroute_session_derived_keys_dropped_total{reason}   derived keys the openings' memo forgot: expired, evicted
//	kvroute_session_entries                  entries held
package session
