package cluster

import (
	"context"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Slack of the bounds on what a replica reads from Redis (limitsFor) over
// the largest reply kvroute's own writes make.
const (
	// stringSlack is added to the largest record or message: the bound of
	// one string is then still above any string go-redis reads of a server
	// (a CLUSTER NODES listing, a HELLO field).
	stringSlack = 64 << 10
	// replySlack is added to the largest MGET of the peers' records: the
	// bound of one reply is then still above Redis Cluster's CLUSTER SLOTS
	// (16,384 slot ranges at most) and COMMAND replies that go-redis reads.
	replySlack = 8 << 20
	// minElems is the least bound of one aggregate's elements: a CLUSTER
	// SLOTS reply lists up to 16,384 slot ranges, and a small member set is
	// returned whole by SSCAN whatever its COUNT.
	minElems = 1 << 16
)

// limitsFor returns the bounds of what a replica's Redis connections read,
// from what kvroute writes: a string is at most a record or a decision
// message (1 MiB) plus slack, an aggregate at most a member-set read of
// membersRead × MaxPeers IDs (twice over, as SSCAN may return more than its
// COUNT) and at least minElems, and a reply at most an MGET of MaxPeers
// records plus slack (about 76 MiB with the defaults: the memory a read is
// documented to take, MaxPeers records of at most 1 MiB).
func limitsFor(cfg Config) respLimits {
	str := int64(max(maxRecordBytes, maxMessageBytes)) + stringSlack
	return respLimits{
		maxString: str,
		maxElems:  max(minElems, int64(2*membersRead*cfg.MaxPeers)),
		maxDepth:  maxRESPDepth,
		maxReply:  int64(cfg.MaxPeers+1)*(str+64) + replySlack,
	}
}

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// boundedDialer wraps dial so that every connection it makes reads through
// a respBound of lim, counting refusals with refused.
func boundedDialer(dial dialFunc, lim respLimits, refused func(reason int)) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wrapConn(conn, lim, refused), nil
	}
}

func wrapConn(conn net.Conn, lim respLimits, refused func(reason int)) net.Conn {
	c := &respConn{Conn: conn, b: respBound{lim: lim, refuse: refused}}
	if _, ok := conn.(syscall.Conn); ok {
		return respSysConn{c}
	}
	return c
}

// respSysConn is a respConn over a socket: go-redis's health check of an
// idle pooled connection peeks at the socket (MSG_PEEK, consuming nothing),
// as it does without the wrapper.
type respSysConn struct{ *respConn }

func (c respSysConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

// newClient builds the replica's Redis client from cfg, its connections
// bounded by lim.
func newClient(cfg Config, lim respLimits, refused func(reason int)) redis.UniversalClient {
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                    cfg.Addrs,
		IsClusterMode:            cfg.ClusterMode,
		Username:                 cfg.Username,
		Password:                 cfg.Password,
		DB:                       cfg.DB,
		ClientName:               "kvroute-" + cfg.ReplicaID,
		Dialer:                   boundedDialer(redis.NewDialer(&redis.Options{DialTimeout: cfg.OpTimeout}), lim, refused),
		DialTimeout:              cfg.OpTimeout,
		ReadTimeout:              cfg.OpTimeout,
		WriteTimeout:             cfg.OpTimeout,
		PoolTimeout:              cfg.OpTimeout,
		ContextTimeoutEnabled:    true,
		MaxRetries:               -1, // the loops retry on their next tick; a retry would only delay the outage signal
		DialerRetries:            1,  // likewise for dials: one attempt per operation
		PoolSize:                 4,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// clientFrom builds the replica's own client from the options of a
// user-supplied go-redis client (a *redis.Client, which NewFailoverClient
// also returns, a *redis.ClusterClient or a *redis.Ring): the same servers,
// credentials, TLS, timeouts and pool size, its connections bounded by lim.
// Bounding the user's client itself would refuse the user's own large
// values. As in newClient, the copy honours context deadlines
// (ContextTimeoutEnabled), so that OpTimeout, which the replica passes as
// a context deadline, bounds every operation whatever the user's timeouts
// (go-redis otherwise waits out ReadTimeout, 3 s by default), and retries
// no command (MaxRetries -1). owned is false for any other
// UniversalClient, which is returned as is and read unbounded.
func clientFrom(user redis.UniversalClient, lim respLimits, refused func(reason int)) (rdb redis.UniversalClient, owned bool) {
	switch c := user.(type) {
	case *redis.Client:
		o := *c.Options()
		if o.Dialer == nil {
			o.Dialer = redis.NewDialer(c.Options())
		}
		o.Dialer = boundedDialer(o.Dialer, lim, refused)
		o.ContextTimeoutEnabled, o.MaxRetries = true, -1
		return redis.NewClient(&o), true
	case *redis.ClusterClient:
		o := *c.Options()
		if o.Dialer == nil {
			o.Dialer = redis.NewDialer(&redis.Options{DialTimeout: o.DialTimeout, TLSConfig: o.TLSConfig})
		}
		o.Dialer = boundedDialer(o.Dialer, lim, refused)
		o.ContextTimeoutEnabled, o.MaxRetries = true, -1
		return redis.NewClusterClient(&o), true
	case *redis.Ring:
		o := *c.Options()
		if o.Dialer == nil {
			o.Dialer = redis.NewDialer(&redis.Options{DialTimeout: o.DialTimeout, TLSConfig: o.TLSConfig})
		}
		o.Dialer = boundedDialer(o.Dialer, lim, refused)
		o.ContextTimeoutEnabled, o.MaxRetries = true, -1
		return redis.NewRing(&o), true
	}
	return user, false
}
