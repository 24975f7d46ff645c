// Package admission is kvroute's admission stage under overload: it decides
// whether and when a request is routed, not where. A Controller plugs into a
// Router as kvroute.Options.Admission; without one nothing changes.
//
// # Requests: priority, flow, deadline
//
// Each request has a priority, a flow and a queue deadline, carried in its
// context (the host sets them before Pick; kvroute.Request stays as it is
// for hosts without admission):
//
//	ctx = admission.WithObjective(ctx, "chat")      // x-gateway-inference-objective
//	ctx = admission.WithFairnessID(ctx, "tenant-a") // x-gateway-inference-fairness-id
//	ctx = admission.WithDeadline(ctx, deadline)     // optional, replaces the objective's queue timeout
//	ctx = admission.Track(ctx)                      // Admit's notes for Hold (FromHeader adds it)
//
// The objective's name maps to a priority through Config.Objectives, which
// mirrors the Inference Extension's InferenceObjective (name → integer
// priority); no objective, or one not in the table (counted in
// kvroute_admission_unknown_objectives_total), gets Config.DefaultPriority.
// A negative priority is sheddable. The flow is the fairness ID (its first
// 256 bytes: two longer IDs that share them are one flow), or
// Config.DefaultFlow. The request's record (Track; FromHeader, which the
// gateway and the ext_proc picker use, adds it) lets Hold, called after
// the pick with the same context, see what Admit did: when the request
// arrived, so that its queue timeout bounds its whole wait, in the queue
// and then at the dispatch gate, and which endpoint its release claimed.
//
// # Admit
//
// Pick waits in Admit under the caller's context; when Admit returns nil
// the pick runs as without admission. When nothing waits in the queue and
// some candidate endpoint is not saturated, Admit returns at once without
// allocating. Otherwise:
//
//   - a sheddable request is refused at once with ErrShed when every
//     candidate is saturated;
//   - any other request waits in its priority band. Higher bands always
//     dispatch first; within a band flows take turns, by round robin (one
//     request each) or deficit round robin (Config.Quantum prompt tokens
//     each); within a flow requests go first come first served or earliest
//     deadline first. A request leaves when one of its own candidates is
//     free (a flow whose first request cannot go does not hold up other
//     flows; within a flow, requests leave in order), when its deadline passes (ErrExpired), when its context
//     ends (the context's error), or when Close runs (ErrClosed). Expiry
//     and cancellation remove it at once, on their own timer and channel.
//   - the queue is bounded in requests and in estimated prompt bytes: when
//     full, the oldest requests of the lowest sheddable band are pushed out
//     (ErrShed) until the new request fits; when pushing out every
//     sheddable request (of the new request's band or lower) would not make
//     room, none is pushed out and the new request is refused
//     (ErrQueueFull, or ErrShed if it is sheddable itself). A request that
//     would not wait (one of its candidates is free once the queue is
//     served, and nothing of its flow is queued) is admitted whatever the
//     queue holds: requests waiting for saturated endpoints do not turn
//     away those of idle ones.
//
// # Saturation
//
// An endpoint is free when it is not saturated and not claimed. Saturated
// means: kvroute's own accounting (TokenDetector: the Router's in-flight
// prefill tokens at the calibrated prefill throughput, and optionally its
// open requests, against Config.Saturation) says so, or an engine Detector
// (the engines' scraped vLLM metrics) has a fresh signal saying so. An
// engine signal can add saturation but never hide what the own accounting
// sees, and an endpoint without a fresh engine signal is judged by the own
// accounting alone: a stale scrape never counts as idle.
//
// Claimed means: a queued request was just released to the endpoint and its
// pick has not yet shown in the endpoint's accounting. Without claims one
// release would let the whole queue through before the first pick commits.
// A claim lapses when the endpoint's accounting moves, when Notify names the
// endpoint, when the released request's caller turns out to have left (no
// pick follows), when Hold learns the request's pick (with the request's
// record, Track: the pick's load then shows on the endpoint it chose, which
// may be another candidate than the one claimed), when the pick fails or
// the host lets go of the request unsent (the Router calls Abandon when
// Pick or Match fails and when a Selection of Match is released without a
// Commit; both with the record, Track, which names the claim), when the
// request is admitted again with the same context (its earlier pick is
// over), when the request's context ends (with or without the record: a
// host without it gets its claims back at the end of each request), or
// after Config.Settle. Each claim is given back once, by whichever comes
// first; Close drops them all.
//
// # Dispatch gate
//
// Admit is fleet-wide: a request passes when some candidate is free, and
// the pick then sends it to its cache-warm endpoint, which may be a
// backlogged one, where an engine's first-come-first-served queue makes an
// interactive request wait behind the sheddable work queued there. Hold is
// the per-endpoint half, called by the host after the pick and before the
// send (the gateway does): a request of a band with priority >= 0 returns
// at once without allocating; a sheddable one is sent only while the
// picked endpoint's engine has headroom (Config.Headroom: fewer waiting
// requests than MaxWaiting, counting those the gate sent since the last
// scrape, and KV-cache usage below MaxKVCache, read from Options.Signals,
// an enginemetrics.Scraper; with the endpoint's signal stale, kvroute's own
// accounting decides, in which the requests held at the gate count since
// their picks committed, so when nothing else is in flight on the endpoint
// (with cluster sharing, the peers' requests included) the first held one
// goes whatever its own load; without Options.Signals the gate is off) and
// no higher band's request that may go to the endpoint (it is among its
// candidates) is queued in Admit (unless the requests held at
// the endpoint's gate alone saturate it in the own accounting: no queued
// request could have it before one of them is sent, so the first goes).
// Otherwise it waits at the endpoint's gate (at most MaxHeld per endpoint;
// a further one is shed at once with ErrShed) until headroom appears, its
// queue deadline passes (ErrExpired; the one it had in Admit's queue: with
// the request's record, Track, the objective's queue timeout counts from
// its arrival to Admit, so the queue and the gate together wait at most
// once that long) or its context ends. The engines' own
// queues stay short, so higher bands are not stuck behind sheddable work,
// and the pick is unchanged: requests still go where their prefix is
// cached. On an error the host ends the Decision without sending. Outcomes
// are counted in kvroute_admission_gate_requests_total{priority,outcome}
// (passed, held, sent, shed, expired, cancelled, closed; a request released
// from the gate as its caller leaves is cancelled, not sent, and gives its
// place in the endpoint's sent count back at once).
//
// # Wake-ups
//
// A queued request leaves when capacity appears, and the Controller learns
// of that three ways: a new request arrives (the queue is served before it
// queues); the host calls Notify(endpoint) when a request's accounting moves
// (its pick committed, its first chunk came, it is done; the gateway does
// so for every request); and, as the fallback for hosts that do not, a
// re-check on the injected clock every Config.Recheck while requests wait.
// Notify costs an atomic load when nothing waits. A request that leaves the
// queue unserved (expired or cancelled) serves it too: the next request of
// its flow, or a lower band's request held at a gate for it, may go now.
//
// # Metrics
//
// With a Registerer: kvroute_admission_requests_total{priority,outcome}
// (outcome admitted, queued, dispatched, expired, cancelled, shed,
// queue_full, closed), kvroute_admission_unknown_objectives_total, and
// under llm-d's flow-control names
// llm_d_epp_flow_control_request_queue_duration_seconds{priority,outcome}
// (Dispatched, EvictedTTL, EvictedContextCancelled, EvictedOther),
// llm_d_epp_flow_control_queue_size{priority} and
// llm_d_epp_flow_control_queue_bytes{priority}; with ShareQueues,
// kvroute_admission_fleet_queue_size{priority}. llm-d also labels by
// fairness ID; kvroute does not, since fairness IDs come from clients and
// would make the label set unbounded.
//
// A nil Registerer registers nothing. New registers every collector of the
// component through Set.Register, all or none (New fails and leaves nothing
// registered). Close unregisters exactly what New registered, so a closed
// component can be built again on the same registry.
//
// # Replicas
//
// With cluster sharing, the Router's load tracker includes the peers'
// in-flight load, so the own accounting's saturation reflects every
// replica's dispatches: one replica's requests saturate an endpoint for all
// of them, within the cluster's staleness bound (a pub/sub hop with shared
// decisions), and no Redis call is made on the request path.
//
// The queues themselves are per replica. ShareQueues(router.Cluster())
// publishes this replica's queue depth per band in its cluster record and
// sums its live peers' (stale or departed peers drop out, bands this
// Controller does not have are ignored and counted); the gauge
// kvroute_admission_fleet_queue_size{priority} reports the fleet's total.
// A record carries at most 64 bands with requests waiting (highest priority
// first) with priorities within ±2^31: a peer's other bands are missing
// from the total here, and that peer counts them
// (kvroute_cluster_record_queue_bands_dropped_total).
// Dispatch stays per replica: a peer's queued requests name no endpoints, so
// holding back a lower band here for a peer's higher band could stall
// requests that do not compete with it.
package admission
