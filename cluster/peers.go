package cluster

import (
	"context"
	"sort"
	"time"
)

// LivePeers lists, in one short Redis exchange, the live replicas of cfg's
// pool other than cfg.ReplicaID that advertise a snapshot URL: the peers a
// replica that is about to start can bootstrap its index from, before it has
// joined the pool itself. A replica whose lease expired is not listed, nor
// one whose record was sent more than a lease ago (whatever its key's TTL)
// or advertises something else than an http(s) URL.
func LivePeers(ctx context.Context, cfg Config) ([]Peer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rdb := newClient(cfg)
	defer rdb.Close()
	k := newKeys(cfg.Pool, cfg.ReplicaID)
	ids, err := redisStore{rdb: rdb, maxMembers: membersRead * cfg.MaxPeers}.Members(ctx, k.members)
	if err != nil {
		return nil, err
	}
	sort.Strings(ids)
	var names, others []string
	for _, id := range ids {
		if id != cfg.ReplicaID && validName(id, 200) && len(others) < cfg.MaxPeers {
			others = append(others, id)
			names = append(names, k.replica(id))
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	vals, err := rdb.MGet(ctx, names...).Result()
	if err != nil {
		return nil, err
	}
	var peers []Peer
	now := time.Now() // LivePeers runs before any replica, and its clock, exists: wall time
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue // lease expired
		}
		rec, err := decodeRecord([]byte(s), cfg.MaxEndpoints)
		if err != nil || !recordFresh(rec.SentMs, now, cfg.Lease) || !validSnapshotURL(rec.SnapshotURL) {
			continue // unreadable, older than a lease whatever its TTL, or nothing to fetch
		}
		peers = append(peers, Peer{ID: others[i], SnapshotURL: rec.SnapshotURL})
	}
	return peers, nil
}
