package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/telemetry"
)

// leaseTimings are the leader election's lease duration, renew deadline
// and retry period: controller-runtime's defaults, which llm-d's router
// picker uses. Tests shorten them.
var leaseTimings = struct{ lease, renew, retry time.Duration }{15 * time.Second, 10 * time.Second, 2 * time.Second}

// leader runs --ha-enable-leader-election: the replicas of one picker
// compete for a coordination.k8s.io Lease, and only the holder is ready,
// so that Envoy sends every request to one picker whose load accounting
// sees them all. It stands by again, not ready, when it loses the lease,
// and competes for it until stopped.
//
// leading is written by the elector's callbacks under mu: OnStartedLeading
// runs on a goroutine of its own that may be scheduled after the term it
// belongs to has ended, so it records leadership only while the term's
// context is live (Run cancels it before calling OnStoppedLeading).
type leader struct {
	lease string // namespace/name, for the logs and the reason
	log   *slog.Logger

	mu      sync.Mutex
	leading bool

	cancel context.CancelFunc
	done   chan struct{} // closed when the election loop has returned
}

// podNameRE takes a Deployment's name from one of its pods' names (the
// ReplicaSet's hash and the pod's suffix follow it).
var podNameRE = regexp.MustCompile(`^(.+)-[a-z0-9]+-[a-z0-9]+$`)

// leaseName is the name of the Lease the replicas compete for: --ha-lease-name,
// or llm-d's router picker's: epp-<namespace>-<pool>.llm-d.ai, where the
// pool is --pool-name's InferencePool or, with --endpoint-selector, the
// picker's Deployment (from $POD_NAME), so that kvroute-epp and llm-d's
// picker replicas of one pool elect one leader among them.
func leaseName(f flags) (string, error) {
	if f.leaseName != "" {
		return f.leaseName, nil
	}
	name := f.poolName
	if name == "" {
		m := podNameRE.FindStringSubmatch(os.Getenv("POD_NAME"))
		if m == nil {
			return "", fmt.Errorf("--ha-enable-leader-election with --endpoint-selector names its Lease after the picker's Deployment, from $POD_NAME (%q is no Deployment's pod name); set $POD_NAME or --ha-lease-name", os.Getenv("POD_NAME"))
		}
		name = m[1]
	}
	return fmt.Sprintf("epp-%s-%s.llm-d.ai", f.poolNamespace, name), nil
}

// startLeaderElection starts competing for the Lease in the pool's
// namespace with kube when f asks for leader election, and returns the
// leader; nil otherwise. clustered says the
// router shares its state with its peers (the cluster block), where one
// active replica is not needed. Stop the leader when done: it releases
// the lease, and so does ctx ending.
func startLeaderElection(ctx context.Context, f flags, kube kubernetes.Interface, clustered bool, set telemetry.Set) (*leader, error) {
	if !f.leaderElection {
		return nil, nil
	}
	name, err := leaseName(f)
	if err != nil {
		return nil, err
	}
	id, err := replicaIdentity()
	if err != nil {
		return nil, err
	}
	l := &leader{lease: f.poolNamespace + "/" + name, log: set.Log(), done: make(chan struct{})}
	if err := set.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kvroute_epp_leader",
		Help: "1 while this replica holds the --ha-enable-leader-election Lease (and may be ready), 0 while it stands by.",
	}, func() float64 {
		if l.isLeading() {
			return 1
		}
		return 0
	})); err != nil {
		return nil, err
	}
	if clustered {
		l.log.Info("--ha-enable-leader-election is not needed: the replicas share their index and load through the cluster block, so each may route; honouring it, one replica is ready at a time")
	}
	cfg := leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: f.poolNamespace, Name: name},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration:   leaseTimings.lease,
		RenewDeadline:   leaseTimings.renew,
		RetryPeriod:     leaseTimings.retry,
		ReleaseOnCancel: true,
		Name:            name,
	}
	// One elector per term: a LeaderElector's Run is not meant to be
	// called again once it has returned.
	newElector := func() (*leaderelection.LeaderElector, error) {
		c := cfg
		c.Callbacks = leaderelection.LeaderCallbacks{
			OnStartedLeading: func(term context.Context) { l.started(term) },
			OnStoppedLeading: l.stopped,
		}
		return leaderelection.NewLeaderElector(c)
	}
	le, err := newElector() // the first, here, so that a bad configuration is an error at start
	if err != nil {
		return nil, fmt.Errorf("--ha-enable-leader-election: %w", err)
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.log.Info("leader election: standing by for the Lease", "lease", l.lease, "identity", id)
	go func() {
		defer close(l.done)
		for {
			le.Run(ctx) // returns when ctx ends, or when this replica loses the lease
			if ctx.Err() != nil {
				return
			}
			if le, err = newElector(); err != nil { // cannot fail: the same config built the first
				l.log.Error("leader election stopped", "lease", l.lease, "err", err)
				return
			}
		}
	}()
	return l, nil
}

// replicaIdentity names this replica in the Lease: its pod name (or host
// name) and a random suffix, unique across restarts.
func replicaIdentity() (string, error) {
	host := os.Getenv("POD_NAME")
	if host == "" {
		var err error
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("--ha-enable-leader-election: %w", err)
		}
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return host + "_" + hex.EncodeToString(b), nil
}

// started records that this replica holds the lease, unless the term has
// already ended.
func (l *leader) started(term context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if term.Err() == nil {
		l.leading = true
		l.log.Info("leader election: holding the Lease, ready once the picker is", "lease", l.lease)
	}
}

// stopped records that this replica does not hold the lease (any more).
func (l *leader) stopped() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leading {
		l.log.Info("leader election: lost the Lease, standing by, not ready", "lease", l.lease)
	}
	l.leading = false
}

func (l *leader) isLeading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

// gate returns the picker's readiness source: src, behind l's lease
// when leader election is on (l not nil).
func (l *leader) gate(src extproc.ReadinessSource) extproc.ReadinessSource {
	if l == nil {
		return src
	}
	return leaderGate{l, src}
}

// leaderGate is the picker's readiness under leader election: not ready
// while this replica does not hold the lease, and otherwise src's.
type leaderGate struct {
	l   *leader
	src extproc.ReadinessSource
}

func (g leaderGate) NotReady() string {
	if !g.l.isLeading() {
		return "standing by: another replica holds the leader election Lease " + g.l.lease
	}
	return g.src.NotReady()
}

// stop stops competing, releases the lease when held, and waits for the
// election loop. It is nil-safe and idempotent.
func (l *leader) stop() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
}
