package cluster

import (
	"net/url"
	"time"
	"unicode/utf8"
)

// Everything a replica reads from Redis was written by someone else: a
// peer, an older version, or anyone with access to the server. Endpoint
// names in peer records, load changes and decisions end up as keys of the
// load tracker, endpoints of the index and values of the endpoint_name
// label, so a replica accepts only the endpoints of its own endpoint set
// (SetEndpoints; the Router passes the endpoints it is given) and drops the
// rest, counted by a fixed reason. The tracker and the index therefore hold
// no more endpoints than the replica was configured with, whatever is in
// Redis.

// Reasons an endpoint name read from Redis is dropped, the label "reason"
// of kvroute_cluster_endpoints_dropped_total.
const (
	epDropUnknown = iota // not in this replica's endpoint set
	epDropInvalid        // empty, too long or not valid UTF-8: never a label value
	numEpDrops
)

var epDropNames = [numEpDrops]string{"unknown_endpoint", "invalid_name"}

// endpointSet is the set of endpoints a replica accepts from Redis; it is
// replaced whole (copy on write), so readers need no lock.
type endpointSet map[string]struct{}

// SetEndpoints replaces the endpoints this replica accepts from the pool's
// shared state: a peer's load, load change or routing decision naming any
// other endpoint is dropped and counted
// (kvroute_cluster_endpoints_dropped_total{reason="unknown_endpoint"}), so
// that nothing read from Redis grows the load tracker or the index beyond
// the replica's own endpoints. Until it is first called the replica accepts
// none. It asks for a read of the peers' records at once, so their load on
// an added endpoint shows without waiting for ReadPeriod. The Router calls
// it from its own SetEndpoints, before it drops the load counters of
// removed endpoints; the peers' load changes pending for a removed endpoint
// are forgotten here. Names that could not be a label value
// (empty, over 1,024 bytes, invalid UTF-8) are never accepted.
func (r *Replica) SetEndpoints(ids []string) {
	if r == nil {
		return
	}
	set := make(endpointSet, len(ids))
	for _, id := range ids {
		if validEndpoint(id) {
			set[id] = struct{}{}
		}
	}
	r.viewsMu.Lock()
	defer r.viewsMu.Unlock()
	r.accepted.Store(&set)
	for _, v := range r.views {
		kept := v.pending[:0]
		for _, d := range v.pending {
			if _, ok := set[d.endpoint]; ok {
				kept = append(kept, d)
			} else { // off the peer's count as well as the total: evicting the peer subtracts its count again
				r.pendingBytes -= deltaBytes(d.endpoint)
				v.bytes -= deltaBytes(d.endpoint)
			}
		}
		clear(v.pending[len(kept):])
		v.pending = kept
	}
	r.met.pendingBytes.Set(float64(r.pendingBytes))
	select { // the peers' load on an added endpoint shows at the next read: make it now
	case r.readNow <- struct{}{}:
	default:
	}
}

// accepts reports whether an endpoint named by the shared state is one of
// this replica's, counting the drop when it is not. It does not allocate.
func (r *Replica) accepts(endpoint []byte) bool {
	if len(endpoint) == 0 || len(endpoint) > maxNameBytes || !utf8.Valid(endpoint) {
		r.met.endpointsDropped[epDropInvalid].Inc()
		return false
	}
	if set := r.accepted.Load(); set != nil {
		if _, ok := (*set)[string(endpoint)]; ok {
			return true
		}
	}
	r.met.endpointsDropped[epDropUnknown].Inc()
	return false
}

// acceptsName is accepts for a name already held as a string.
func (r *Replica) acceptsName(endpoint string) bool {
	if !validEndpoint(endpoint) {
		r.met.endpointsDropped[epDropInvalid].Inc()
		return false
	}
	if set := r.accepted.Load(); set != nil {
		if _, ok := (*set)[endpoint]; ok {
			return true
		}
	}
	r.met.endpointsDropped[epDropUnknown].Inc()
	return false
}

// recordFresh reports whether a record sent at sentMs (the sender's clock,
// Unix milliseconds) is within a lease of now, either way: a record older
// than its sender's lease is not a live peer whatever TTL its key has (a
// record written without one would otherwise live forever), and one dated
// more than a lease ahead is not believed either. Replicas' clocks must
// agree within a fraction of the lease, as NTP keeps them.
func recordFresh(sentMs uint64, now time.Time, lease time.Duration) bool {
	if sentMs > 1<<62 {
		return false
	}
	age := now.UnixMilli() - int64(sentMs)
	return age <= lease.Milliseconds() && -age <= lease.Milliseconds()
}

// validEndpoint reports whether name can be an endpoint ID taken from the
// shared state: 1 to 1,024 bytes of valid UTF-8 (any label value must be).
func validEndpoint(name string) bool {
	return name != "" && len(name) <= maxNameBytes && utf8.ValidString(name)
}

// validSnapshotURL reports whether a peer's advertised snapshot URL is one a
// bootstrap may fetch: an absolute http or https URL with a host.
func validSnapshotURL(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
