package cluster

import (
	"context"
	"sort"
)

// refresh publishes the local load and renews the lease: SET record PX
// lease, SADD members and PEXPIRE members lease, pipelined (one round
// trip).
func (r *Replica) refresh() {
	if r.skipRefresh() {
		return // only reads failed: the read loop probes Redis; the first refresh after recovery re-registers
	}
	seq, loads, left := r.localLoad()
	for i, n := range left {
		if n > 0 {
			r.met.recordLoadsDropped[i].Add(float64(n))
		}
	}
	if r.testHookRefresh != nil {
		r.testHookRefresh()
	}
	rec := encodeRecord(nil, r.cfg.SnapshotURL, uint64(r.now().UnixMilli()), seq, loads, r.ownQueues())
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
	defer cancel()
	err := r.store.Refresh(ctx, r.keys.selfKey, rec, r.cfg.Lease, r.keys.members, r.cfg.ReplicaID)
	r.countCommands(3)
	r.result(opRefresh, err)
}

// read lists the members, fetches their records in one MGET, prunes members
// whose lease expired and replaces the tracker's peer load with the sum of
// the live peers' loads.
func (r *Replica) read() {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
	defer cancel()
	ids, err := r.store.Members(ctx, r.keys.members)
	r.countCommands(1)
	if err != nil {
		r.result(opRead, err)
		return
	}
	sort.Strings(ids)
	others := ids[:0]
	var gone []string
	for _, id := range ids {
		switch {
		case !validName(id, 200): // no replica has such an ID: garbage in the member set
			r.met.invalidRecords.Inc()
			gone = append(gone, id)
		case id != r.cfg.ReplicaID:
			others = append(others, id)
		}
	}
	if len(others) > r.cfg.MaxPeers {
		r.met.peersIgnored.Add(float64(len(others) - r.cfg.MaxPeers))
		others = others[:r.cfg.MaxPeers]
	}
	var vals []Value
	if len(others) > 0 {
		names := make([]string, len(others))
		for i, id := range others {
			names[i] = r.keys.replica(id)
		}
		vals, err = getValues(ctx, r.store, names)
		r.countCommands(1)
		if err != nil {
			r.result(opRead, err)
			return
		}
	}
	listed := make(map[string]struct{}, len(others))
	for _, id := range others {
		listed[id] = struct{}{}
	}
	live := make(map[string]Record, len(vals))
	var peers []Peer
	now := r.now()
	for i, v := range vals {
		rec, state := readRecord(v, now, r.cfg)
		switch state {
		case recordExpired:
			gone = append(gone, others[i])
			continue
		case recordUnreadable:
			r.met.invalidRecords.Inc()
			continue
		case recordStale: // left in the member set: its key's TTL, not this replica's clock, says when it goes
			r.met.staleRecords.Inc()
			continue
		case recordBadURL: // listed as a peer, but nothing to bootstrap from
			r.met.invalidRecords.Inc()
		}
		peers = append(peers, Peer{ID: others[i], SnapshotURL: rec.SnapshotURL})
		live[others[i]] = rec
	}
	if len(gone) > 0 {
		_ = r.store.Forget(ctx, r.keys.members, gone) // best effort; the next reader retries
		r.countCommands(1)
	}
	if r.ctx.Err() != nil {
		return
	}
	if r.writesDown() { // degraded until a refresh succeeds: local state only, the read a probe
		r.stats.reads.Add(1)
		r.result(opRead, nil)
		return
	}
	r.mergeRecords(live, listed)
	r.sumQueues(live)
	r.peersMu.Lock()
	r.peers = peers
	r.peersMu.Unlock()
	r.met.peers.Set(float64(len(peers)))
	r.stats.reads.Add(1)
	r.result(opRead, nil)
}
