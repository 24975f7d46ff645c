package session

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are an Affinity's collectors. Their labels take values from
// fixed sets only (outcome, source, reason), never from the wire: neither session
// keys nor endpoints are labels.
type metrics struct {
	lookups [numOutcomes]prometheus.Counter
	keys    [numSources]prometheus.Counter
	expired prometheus.Counter
	evicted prometheus.Counter
	cookies prometheus.Counter
	// peer are the peers' records by what the store made of them
	// (peerLearned, peerSuperseded, peerExpired).
	peer    [numPeerOutcomes]prometheus.Counter
	entries prometheus.GaugeFunc
	// derivedDropped are the derived keys the openings' memo forgot, by
	// reason (dropExpired, dropEvicted).
	derivedDropped [numDropReasons]prometheus.Counter

	lookupVec, keyVec, peerVec, derivedDroppedVec *prometheus.CounterVec
}

// Outcomes of kvroute_session_peer_records_total: what became of a record
// another replica shared.
const (
	peerLearned    = iota // stored: the session's latest turn known here
	peerSuperseded        // not stored: the store held a later turn of the session
	peerExpired           // not stored: the turn was longer ago than the TTL
	numPeerOutcomes
)

var peerOutcomeNames = [numPeerOutcomes]string{"learned", "superseded", "expired"}

// Reasons of kvroute_session_derived_keys_dropped_total: why the openings'
// memo (Config.Derive) forgot a derived key.
const (
	dropExpired = iota // rendered longer ago than the TTL
	dropEvicted        // its shard of the memo was full
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{"expired", "evicted"}

func newMetrics(entries func() int) *metrics {
	m := &metrics{
		lookupVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_session_lookups_total",
			Help: "Requests with a session key, by what the session store held once the decision committed: hit (the session's last endpoint chosen again), moved (another endpoint chosen, e.g. the last one was saturated), miss (nothing remembered), expired (remembered longer ago than the TTL).",
		}, []string{"outcome"}),
		keyVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_session_keys_total",
			Help: "Requests keyed, by where the session key came from: header, cookie, derived (from the conversation's opening), host (Request.Session, set by the host itself), none, or invalid (a malformed header or cookie value, skipped: counted alone when the request had no other key and was routed without a session, else beside the source its key came from).",
		}, []string{"source"}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_session_expired_total",
			Help: "Sessions removed from the store because their last turn was longer ago than the TTL, and sessions learned from other replicas that were already past it (not stored).",
		}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_session_evicted_total",
			Help: "Sessions forgotten before their TTL because their shard of the store was full (the shard's least recently routed go first).",
		}),
		peerVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_session_peer_records_total",
			Help: "Sessions' endpoints shared by other router replicas (cluster sharing), by outcome: learned (stored), superseded (not stored: the store held a later turn of the session, e.g. a delayed message) or expired (not stored: the turn was longer ago than the TTL, also counted in kvroute_session_expired_total).",
		}, []string{"outcome"}),
		cookies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_session_cookies_set_total",
			Help: "Responses that set the session cookie: the request had no session key (none sent, none derived), or its cookie named another endpoint than the one that served it.",
		}),
		derivedDroppedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_session_derived_keys_dropped_total",
			Help: "Derived session keys (derive) the openings' memo forgot, by reason: expired (the opening was rendered longer ago than the TTL) or evicted (its shard of the memo was full). The conversation's next turn renders its opening again, and keeps its key only if that render succeeds.",
		}, []string{"reason"}),
		entries: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kvroute_session_entries",
			Help: "Sessions in the store, expired ones not yet removed included.",
		}, func() float64 { return float64(entries()) }),
	}
	for i, n := range outcomeNames {
		m.lookups[i] = m.lookupVec.WithLabelValues(n)
	}
	for i, n := range sourceNames {
		m.keys[i] = m.keyVec.WithLabelValues(n)
	}
	for i, n := range peerOutcomeNames {
		m.peer[i] = m.peerVec.WithLabelValues(n)
	}
	for i, n := range dropReasonNames {
		m.derivedDropped[i] = m.derivedDroppedVec.WithLabelValues(n)
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.lookupVec, m.keyVec, m.expired, m.evicted, m.peerVec, m.cookies, m.derivedDroppedVec, m.entries}
}
