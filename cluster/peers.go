package cluster

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Skipped counts the members of a pool LivePeers passed over, by reason, so
// that a replica whose bootstrap found no peer can say why. The steady-state
// reader counts the same records in kvroute_cluster_invalid_records_total
// (Unreadable, and an invalid snapshot URL) and
// kvroute_cluster_stale_records_total (Stale).
type Skipped struct {
	// Unreadable counts members whose ID is no valid replica ID or whose
	// record does not decode.
	Unreadable int
	// Stale counts records sent more than a lease ago, whatever their key's
	// TTL, or dated more than a lease ahead: the replicas' clocks disagree,
	// or the record outlived its writer.
	Stale int
	// NoSnapshot counts live records that advertise no snapshot URL, or
	// one that is not an absolute http(s) URL.
	NoSnapshot int
	// Expired counts members whose record is gone: their lease expired or
	// they left the pool.
	Expired int
	// BeyondMax counts members whose record was not read because MaxPeers
	// others came before them in ID order, as the steady-state reader
	// counts them in kvroute_cluster_peers_ignored_total. (The member list
	// itself is read up to 4 × MaxPeers IDs, so that garbage in the set
	// cannot grow a read's memory; members beyond it are not seen at all.)
	BeyondMax int
}

// String describes the counts for a log line or an error, such as
// "1 unreadable, 2 stale, 0 without a snapshot URL, 0 expired, 0 beyond
// maxPeers".
func (s Skipped) String() string {
	return fmt.Sprintf("%d unreadable, %d stale, %d without a snapshot URL, %d expired, %d beyond maxPeers",
		s.Unreadable, s.Stale, s.NoSnapshot, s.Expired, s.BeyondMax)
}

// LivePeers lists, in one short Redis exchange, the live replicas of cfg's
// pool other than cfg.ReplicaID that advertise a snapshot URL: the peers a
// replica that is about to start can bootstrap its index from, before it has
// joined the pool itself. A replica whose lease expired is not listed, nor
// one whose record was sent more than a lease ago (whatever its key's TTL)
// or advertises something else than an http(s) URL; Skipped counts the
// members passed over, by reason, as the steady-state reader classifies
// them.
func LivePeers(ctx context.Context, cfg Config) ([]Peer, Skipped, error) {
	var skipped Skipped
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, skipped, err
	}
	rdb := newClient(cfg, limitsFor(cfg), nil) // a record over the bound reads as empty: Unreadable
	defer rdb.Close()
	store := redisStore{rdb: rdb, maxMembers: membersRead * cfg.MaxPeers}
	k := newKeys(cfg.Pool, cfg.ReplicaID)
	ids, err := store.Members(ctx, k.members)
	if err != nil {
		return nil, skipped, err
	}
	sort.Strings(ids)
	var names, others []string
	for _, id := range ids {
		switch {
		case !validName(id, 200):
			skipped.Unreadable++
		case id == cfg.ReplicaID:
		case len(others) < cfg.MaxPeers:
			others = append(others, id)
			names = append(names, k.replica(id))
		default:
			skipped.BeyondMax++
		}
	}
	if len(names) == 0 {
		return nil, skipped, nil
	}
	vals, err := getValues(ctx, store, names)
	if err != nil {
		return nil, skipped, err
	}
	var peers []Peer
	now := time.Now() // LivePeers runs before any replica, and its clock, exists: wall time
	for i, v := range vals {
		rec, state := readRecord(v, now, cfg)
		switch {
		case state == recordExpired:
			skipped.Expired++
		case state == recordUnreadable:
			skipped.Unreadable++
		case state == recordStale:
			skipped.Stale++
		case rec.SnapshotURL == "": // none, or an invalid one: nothing to fetch
			skipped.NoSnapshot++
		default:
			peers = append(peers, Peer{ID: others[i], SnapshotURL: rec.SnapshotURL})
		}
	}
	return peers, skipped, nil
}

// recordState is what a reader of the pool makes of one member's record.
type recordState int

const (
	recordLive       recordState = iota // a live peer's record
	recordBadURL                        // live, but its snapshot URL was invalid and is cleared
	recordExpired                       // no record: the lease expired or the peer left
	recordUnreadable                    // the record does not decode
	recordStale                         // sent more than a lease ago or ahead (recordFresh)
)

// readRecord decodes one member's record and classifies it, for the
// steady-state reader and LivePeers alike. A live record's snapshot URL
// that a bootstrap may not fetch is cleared (recordBadURL): the replica is
// a peer, with nothing to bootstrap from.
func readRecord(v Value, now time.Time, cfg Config) (Record, recordState) {
	if !v.OK {
		return Record{}, recordExpired
	}
	rec, err := decodeRecord(v.Data, cfg.MaxEndpoints)
	if err != nil {
		return Record{}, recordUnreadable
	}
	if !recordFresh(rec.SentMs, now, cfg.Lease) { // older than a lease: not live, whatever its TTL
		return Record{}, recordStale
	}
	if rec.SnapshotURL != "" && !validSnapshotURL(rec.SnapshotURL) {
		rec.SnapshotURL = ""
		return rec, recordBadURL
	}
	return rec, recordLive
}
