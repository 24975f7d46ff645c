package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config configures a Replica. The zero value has no Addrs and means "no
// cluster": the root Router then runs nothing of this package. Durations are
// Go duration strings in JSON ("250ms", "3s"), each at most 87600h (ten
// years).
type Config struct {
	// Addrs are the Redis (or Valkey) servers, "host:port" (a port of
	// 1-65535; an IPv6 host in brackets). One address is a
	// standalone server (or a proxy); several, or ClusterMode, are the seed
	// nodes of a Redis Cluster.
	Addrs []string `json:"addrs"`
	// ClusterMode uses the Redis Cluster protocol even with one seed address.
	ClusterMode bool `json:"clusterMode"`
	// Username and Password authenticate to Redis (ACL user, or the
	// requirepass password with an empty Username).
	Username string `json:"username"`
	Password string `json:"password"`
	// DB is the database number of a standalone server. Redis Cluster has
	// only 0: with several Addrs or ClusterMode any other is an error.
	DB int `json:"db"`
	// Pool names the group of replicas that share state: every key and the
	// channel carry it as a hash tag, {pool}, so on Redis Cluster all of a
	// pool's keys live in one slot (one node) and multi-key reads work.
	// Default "default". Letters, digits and "-_.:" only.
	Pool string `json:"pool"`
	// ReplicaID identifies this replica; unique per process. Default: the
	// host name plus a random suffix.
	ReplicaID string `json:"replicaId"`
	// SnapshotURL is where peers fetch this replica's index snapshot when they
	// bootstrap (advertised in the membership record): an absolute http(s)
	// URL, as the peers accept no other; empty advertises none.
	SnapshotURL string `json:"snapshotUrl"`
	// Lease is the lifetime of this replica's record (membership and load):
	// a replica that stops refreshing, crashed or cut off, disappears with
	// its load after Lease. Default 3s; at least 2 × RefreshPeriod.
	Lease time.Duration `json:"lease"`
	// RefreshPeriod is how often the replica republishes its load and
	// renews its lease. Default 250ms.
	RefreshPeriod time.Duration `json:"refreshPeriod"`
	// ReadPeriod is how often the replica reads the peers' records.
	// Default 250ms.
	ReadPeriod time.Duration `json:"readPeriod"`
	// OpTimeout bounds every Redis operation (dial, command, pipeline);
	// an operation that takes longer counts as Redis unreachable. Default
	// 500ms.
	OpTimeout time.Duration `json:"opTimeout"`
	// DisableSharedDecisions turns off publishing and applying routing
	// decisions (speculative entries on every replica); load and membership
	// are still shared.
	DisableSharedDecisions bool `json:"disableSharedDecisions"`
	// ShardedPubSub uses SPUBLISH/SSUBSCRIBE (Redis 7+): on Redis Cluster
	// the decisions then travel only within the pool's shard instead of
	// being broadcast to every node.
	ShardedPubSub bool `json:"shardedPubSub"`
	// PublishInterval is the least time between two messages that carry
	// decisions alone: the decisions queued meanwhile travel in one
	// PUBLISH. It trades a few milliseconds of a decision's propagation for
	// fewer Redis commands. A load change (dispatch, first chunk, end) does
	// not wait for it: it is sent at once, with the decisions queued so
	// far, since a peer's stale view of the load sends its new requests
	// where this replica's just went. Default 5ms; negative publishes every
	// decision as soon as it is queued.
	PublishInterval time.Duration `json:"publishInterval"`
	// DecisionQueue is the number of decisions waiting to be published;
	// when it is full a decision is dropped (counted), never waited for.
	// Default 128; at most 1,048,576, and DecisionQueue ×
	// MaxKeysPerDecision at most 67,108,864, as both halves of the queue
	// are allocated up front.
	DecisionQueue int `json:"decisionQueue"`
	// DeltaQueue is the number of this replica's load changes (dispatches
	// and releases) waiting to be published with the next decision message;
	// when it is full a change is dropped (counted) and the peers see it in
	// the next record instead. Default 1024; at most 1,048,576.
	DeltaQueue int `json:"deltaQueue"`
	// MaxPendingDeltaBytes bounds the memory of the peers' load changes held
	// here until a record of theirs includes them; a change over it is
	// dropped (counted) and that peer's changes are ignored until its next
	// record. When it is full, a peer within its fair share of it (the
	// bound divided among the peers) still gets its change in: the peer
	// holding the most, over its share, loses its pending changes instead
	// (counted), so one peer's flood cannot shut the others out.
	// Default 4 MiB.
	MaxPendingDeltaBytes int `json:"maxPendingDeltaBytes"`
	// MaxKeysPerDecision caps the block keys a decision carries (the
	// prompt's leading blocks; the rest are not shared). Default 512
	// (32,768 tokens at block size 64); at most about 130,000, so that a
	// decision fits a message (1 MiB).
	MaxKeysPerDecision int `json:"maxKeysPerDecision"`
	// MaxPeers caps the peer records read; more are ignored and counted.
	// Default 64; at most 65,536.
	MaxPeers int `json:"maxPeers"`
	// MaxEndpoints caps the endpoints in one record, ours or a peer's.
	// Default 4096. A record this replica writes also stays within the
	// 1 MiB every peer accepts: with the longest endpoint names fewer
	// loaded endpoints fit, and the loads of the others are left out of
	// that record. Each loaded endpoint left out is counted in
	// kvroute_cluster_record_loads_dropped_total (reason max_endpoints or
	// record_size).
	MaxEndpoints int `json:"maxEndpoints"`
}

// Defaults.
const (
	DefaultPool                 = "default"
	DefaultLease                = 3 * time.Second
	DefaultRefreshPeriod        = 250 * time.Millisecond
	DefaultReadPeriod           = 250 * time.Millisecond
	DefaultOpTimeout            = 500 * time.Millisecond
	DefaultPublishInterval      = 5 * time.Millisecond
	DefaultDecisionQueue        = 128
	DefaultDeltaQueue           = 1024
	DefaultMaxPendingDeltaBytes = 4 << 20
	DefaultMaxKeysPerDecision   = 512
	DefaultMaxPeers             = 64
	DefaultMaxEndpoints         = 4096
	// maxNameBytes caps a replica ID, an endpoint ID or a snapshot URL.
	maxNameBytes = 1024
)

// Upper bounds of the size settings, which Validate checks: New allocates
// the queues up front, and the bounds of what a Redis connection reads
// grow with MaxPeers, so larger values could not be allocated (the process
// would die) or would overflow.
const (
	// maxQueue bounds DecisionQueue and DeltaQueue.
	maxQueue = 1 << 20
	// maxQueuedKeys bounds DecisionQueue × MaxKeysPerDecision: the decision
	// queue's two halves then hold at most 1 GiB of keys.
	maxQueuedKeys = 1 << 26
	// maxPeersCap bounds MaxPeers.
	maxPeersCap = 1 << 16
	// maxDuration bounds every duration setting: ten years, far past any
	// useful period or timeout, and small enough that the sums the replica
	// makes of them (StalenessBound, 2 × Lease) cannot overflow
	// time.Duration into a negative or small value.
	maxDuration = 10 * 365 * 24 * time.Hour
)

// randRead draws the random suffix of a default ReplicaID (crypto/rand's
// Read; a test counts its calls).
var randRead = rand.Read

// ErrInvalidConfig is wrapped by every configuration error of this package.
var ErrInvalidConfig = errors.New("cluster: invalid config")

// Enabled reports whether the configuration asks for a cluster (any Addrs).
func (c Config) Enabled() bool { return len(c.Addrs) > 0 }

// WithDefaults returns c with every zero setting at its default; an empty
// ReplicaID becomes the host name plus a random suffix, drawn anew at each
// call.
func (c Config) WithDefaults() Config {
	c = c.withSettingDefaults()
	if c.ReplicaID == "" {
		var b [6]byte
		_, _ = randRead(b[:])
		c.ReplicaID = defaultReplicaID(b)
	}
	return c
}

// defaultReplicaID is the default ReplicaID of this host with the suffix b:
// at most 113 bytes, each a name byte.
func defaultReplicaID(b [6]byte) string {
	host, _ := os.Hostname()
	return sanitize(host) + "-" + hex.EncodeToString(b[:])
}

// withSettingDefaults is WithDefaults but for ReplicaID, which it leaves
// as it is.
func (c Config) withSettingDefaults() Config {
	if c.Pool == "" {
		c.Pool = DefaultPool
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Lease, DefaultLease)
	def(&c.RefreshPeriod, DefaultRefreshPeriod)
	def(&c.ReadPeriod, DefaultReadPeriod)
	def(&c.OpTimeout, DefaultOpTimeout)
	def(&c.PublishInterval, DefaultPublishInterval)
	defInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defInt(&c.DecisionQueue, DefaultDecisionQueue)
	defInt(&c.DeltaQueue, DefaultDeltaQueue)
	defInt(&c.MaxPendingDeltaBytes, DefaultMaxPendingDeltaBytes)
	defInt(&c.MaxKeysPerDecision, DefaultMaxKeysPerDecision)
	defInt(&c.MaxPeers, DefaultMaxPeers)
	defInt(&c.MaxEndpoints, DefaultMaxEndpoints)
	return c
}

// Validate reports the first invalid setting of c, each zero setting read
// as WithDefaults sets it. An empty ReplicaID is checked as a default one of
// this host (its length bounds a decision's keys) without drawing its random
// suffix: validating a configuration neither consumes randomness nor
// changes what a later WithDefaults yields.
func (c Config) Validate() error {
	c = c.withSettingDefaults()
	if c.ReplicaID == "" {
		c.ReplicaID = defaultReplicaID([6]byte{})
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	for _, a := range c.Addrs {
		if !validAddr(a) {
			return bad("addr %q is not host:port", a)
		}
	}
	switch {
	case !validName(c.Pool, 64):
		return bad("pool %q: want 1-64 letters, digits or -_.:", c.Pool)
	case !validName(c.ReplicaID, 200):
		return bad("replicaId %q: want 1-200 letters, digits or -_.:", c.ReplicaID)
	case len(c.SnapshotURL) > maxNameBytes:
		return bad("snapshotUrl is longer than %d bytes", maxNameBytes)
	case c.SnapshotURL != "" && !validSnapshotURL(c.SnapshotURL): // the peers would refuse it, and count it at every read
		return bad("snapshotUrl %q is not an absolute http(s) URL", c.SnapshotURL)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"refreshPeriod", c.RefreshPeriod}, {"readPeriod", c.ReadPeriod}, {"opTimeout", c.OpTimeout}} {
		if d.v <= 0 {
			return bad("%s %v must be positive", d.key, d.v)
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"lease", c.Lease}, {"refreshPeriod", c.RefreshPeriod}, {"readPeriod", c.ReadPeriod},
		{"opTimeout", c.OpTimeout}, {"publishInterval", c.PublishInterval},
	} {
		if d.v > maxDuration {
			return bad("%s %v is over %v", d.key, d.v, maxDuration)
		}
	}
	if c.Lease < 2*c.RefreshPeriod {
		return bad("lease %v must be at least twice refreshPeriod %v", c.Lease, c.RefreshPeriod)
	}
	for _, n := range []struct {
		key string
		v   int
	}{
		{"decisionQueue", c.DecisionQueue}, {"deltaQueue", c.DeltaQueue}, {"maxPendingDeltaBytes", c.MaxPendingDeltaBytes},
		{"maxKeysPerDecision", c.MaxKeysPerDecision}, {"maxPeers", c.MaxPeers}, {"maxEndpoints", c.MaxEndpoints},
	} {
		if n.v < 0 {
			return bad("%s %d is negative", n.key, n.v)
		}
	}
	switch {
	case c.DB < 0:
		return bad("db %d is negative", c.DB)
	case c.DB != 0 && (c.ClusterMode || len(c.Addrs) > 1):
		return bad("db %d: Redis Cluster (clusterMode, or several addrs) has only database 0", c.DB)
	case c.MaxKeysPerDecision > maxDecisionKeys(c.ReplicaID):
		return bad("maxKeysPerDecision %d: a decision of that many keys does not fit a message of %d bytes (at most %d keys)",
			c.MaxKeysPerDecision, maxMessageBytes, maxDecisionKeys(c.ReplicaID))
	case c.DecisionQueue > maxQueue || c.DeltaQueue > maxQueue:
		return bad("decisionQueue %d and deltaQueue %d must be at most %d: New allocates both queues up front", c.DecisionQueue, c.DeltaQueue, maxQueue)
	case c.DecisionQueue*c.MaxKeysPerDecision > maxQueuedKeys: // no overflow: both factors are bounded above
		return bad("decisionQueue %d × maxKeysPerDecision %d must be at most %d keys: New allocates twice as many up front (8 bytes each)",
			c.DecisionQueue, c.MaxKeysPerDecision, maxQueuedKeys)
	case c.MaxPeers > maxPeersCap:
		return bad("maxPeers %d must be at most %d", c.MaxPeers, maxPeersCap)
	}
	return nil
}

// StalenessBound is the longest a peer's load change takes to show in this
// replica's Load when Redis is healthy: the peer republishes within
// RefreshPeriod, this replica reads within ReadPeriod, and each of the two
// operations may take up to OpTimeout.
func (c Config) StalenessBound() time.Duration {
	return c.RefreshPeriod + c.ReadPeriod + 2*c.OpTimeout
}

// validAddr reports whether a is host:port with a port go-redis can dial
// (1-65535); the host may be empty (the local system) or an IPv6 address
// in brackets.
func validAddr(a string) bool {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	return err == nil && p > 0
}

func validName(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func nameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-_.:", b) >= 0
}

func sanitize(s string) string {
	out := []byte(s)
	for i, b := range out {
		if !nameByte(b) {
			out[i] = '_'
		}
	}
	if len(out) > 100 {
		out = out[:100]
	}
	if len(out) == 0 {
		return "replica"
	}
	return string(out)
}

// keys are the Redis names of one pool. The {pool} hash tag puts them all
// in one Redis Cluster slot.
type keys struct {
	members string // SET of replica IDs
	prefix  string // + replica ID: the replica's record, with a TTL (its lease)
	channel string // decisions
	selfKey string
}

func newKeys(pool, self string) keys {
	base := "kvroute:{" + pool + "}:"
	return keys{members: base + "replicas", prefix: base + "replica:", channel: base + "decisions", selfKey: base + "replica:" + self}
}

func (k keys) replica(id string) string { return k.prefix + id }
