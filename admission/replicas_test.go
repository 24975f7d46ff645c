package admission

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/telemetry"
)

// replica is one active-active router replica with its admission.
type replica struct {
	router *kvroute.Router
	ctrl   *Controller
}

// newReplica builds a Router in pool on rs with an admission that saturates
// an endpoint at two open requests (the token threshold is off, so the test
// does not depend on calibration), objectives chat (1) and batch (-1).
func newReplica(t *testing.T, rs *redistest.Server, pool, id string, sharedDecisions bool, set telemetry.Set) *replica {
	t.Helper()
	ctrl, err := New(Config{
		Objectives: []Objective{{Name: "chat", Priority: 1}, {Name: "batch", Priority: -1}},
		Saturation: Saturation{MaxPrefillBacklog: -1, MaxOpenRequests: 2},
	}, Options{Set: set})
	if err != nil {
		t.Fatal(err)
	}
	cfg := kvroute.DefaultConfig()
	cfg.Model = "m"
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	cfg.Cluster = cluster.Config{Addrs: []string{rs.Addr}, Pool: pool, ReplicaID: id,
		DisableSharedDecisions: !sharedDecisions}
	r, err := kvroute.New(context.Background(), cfg, kvroute.Options{Admission: ctrl})
	if err != nil {
		ctrl.Close()
		t.Fatal(err)
	}
	ctrl.SetLoad(r.Load())
	return &replica{router: r, ctrl: ctrl}
}

func (r *replica) close() {
	r.ctrl.Close()
	r.router.Close()
}

// Two replicas share one endpoint. Replica a's in-flight requests saturate
// it; replica b, which has routed nothing, then sheds sheddable traffic and
// queues the rest for it, because its own accounting reads a's load through
// the cluster. When a's requests end, b's queued request goes. With shared
// decisions a's load travels in its load changes (a pub/sub hop); without,
// in its periodic record (within the cluster's staleness bound).
func TestReplicaSaturationIncludesPeersLoad(t *testing.T) {
	for _, tc := range []struct {
		name            string
		sharedDecisions bool
	}{{"load changes", true}, {"records only", false}} {
		t.Run(tc.name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			rs := redistest.Start(t)
			defer func() { _ = rs.Stop() }()
			a := newReplica(t, rs, "adm", "a", tc.sharedDecisions, telemetry.Set{})
			defer a.close()
			b := newReplica(t, rs, "adm", "b", tc.sharedDecisions, telemetry.Set{})
			defer b.close()
			eps := []kvroute.Endpoint{{ID: "10.0.0.1:8000"}}
			for _, r := range []*replica{a, b} {
				if err := r.router.SetEndpoints(eps); err != nil {
					t.Fatal(err)
				}
			}
			chat, batch := WithObjective(context.Background(), "chat"), WithObjective(context.Background(), "batch")

			var held []*kvroute.Decision
			for range 2 { // a fills the endpoint up to the threshold
				d, err := a.router.Pick(chat, tokensReq(256), eps)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, d)
			}
			waitFor(t, func() bool { // b has no request of its own: only a's load can saturate it
				sat, _ := b.ctrl.own.Saturation(eps[0])
				return sat
			})
			if _, open, _ := b.router.Load().Load(eps[0].ID); open != 2 {
				t.Fatalf("b sees %d open requests on the endpoint, want a's 2", open)
			}
			if _, err := b.router.Pick(batch, tokensReq(256), eps); !errors.Is(err, ErrShed) {
				t.Fatalf("b's sheddable request: %v, want ErrShed", err)
			}
			got := make(chan error, 1)
			go func() {
				d, err := b.router.Pick(chat, tokensReq(256), eps)
				if err == nil {
					d.Done(kvroute.DoneInfo{})
				}
				got <- err
			}()
			waitFor(t, func() bool { return b.ctrl.Queued() == 1 })
			for _, d := range held { // a's requests end; b learns it through the cluster and its re-check
				d.Done(kvroute.DoneInfo{})
			}
			if err := <-got; err != nil {
				t.Fatalf("b's queued request: %v, want dispatched", err)
			}
		})
	}
}

// fleetQueued reads kvroute_admission_fleet_queue_size{priority} from reg.
func fleetQueued(t *testing.T, reg *prometheus.Registry, priority string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_admission_fleet_queue_size" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == priority {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// Each replica's queue depth reaches the other with its record: the fleet
// gauge counts a's and b's queued requests on both, and returns to zero
// when they are dispatched.
func TestReplicasShareQueueDepth(t *testing.T) {
	defer leakcheck.Check(t)()
	rs := redistest.Start(t)
	defer func() { _ = rs.Stop() }()
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a := newReplica(t, rs, "fleet", "a", true, telemetry.Set{Registerer: regA})
	defer a.close()
	b := newReplica(t, rs, "fleet", "b", true, telemetry.Set{Registerer: regB})
	defer b.close()
	for _, r := range []*replica{a, b} {
		if err := r.ctrl.ShareQueues(r.router.Cluster()); err != nil {
			t.Fatal(err)
		}
	}
	eps := []kvroute.Endpoint{{ID: "10.0.0.1:8000"}}
	for _, r := range []*replica{a, b} {
		if err := r.router.SetEndpoints(eps); err != nil {
			t.Fatal(err)
		}
	}
	chat := WithObjective(context.Background(), "chat")
	var held []*kvroute.Decision
	for range 2 {
		d, err := a.router.Pick(chat, tokensReq(256), eps)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, d)
	}
	waitFor(t, func() bool { sat, _ := b.ctrl.own.Saturation(eps[0]); return sat })
	got := make(chan error, 2)
	queue := func(r *replica) {
		go func() {
			d, err := r.router.Pick(chat, tokensReq(256), eps)
			if err == nil {
				d.Done(kvroute.DoneInfo{})
			}
			got <- err
		}()
		waitFor(t, func() bool { return r.ctrl.Queued() == 1 })
	}
	queue(a)
	waitFor(t, func() bool { return fleetQueued(t, regA, "1") == 1 && fleetQueued(t, regB, "1") == 1 })
	queue(b)
	waitFor(t, func() bool { return fleetQueued(t, regA, "1") == 2 && fleetQueued(t, regB, "1") == 2 })
	if v := testutil.ToFloat64(b.ctrl.met.size.WithLabelValues("1")); v != 1 {
		t.Fatalf("b's own queue size %v, want 1", v)
	}
	for _, d := range held {
		d.Done(kvroute.DoneInfo{})
	}
	for range 2 {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return fleetQueued(t, regA, "1") == 0 && fleetQueued(t, regB, "1") == 0 })
	if v := fleetQueued(t, regB, "-1"); v != 0 {
		t.Fatalf("fleet queue of band -1: %v, want 0", v)
	}
}

// A Controller shares its queues with one replica: a second replica is
// refused (the first would go on publishing this Controller's depths after
// Close), and so is a call after Close, which would otherwise replace the
// sharing of the Controller that took the replica over, for good. Nothing
// is left running once everything is closed.
func TestShareQueuesOnceAndNeverAfterClose(t *testing.T) {
	defer leakcheck.Check(t)()
	rs := redistest.Start(t)
	defer func() { _ = rs.Stop() }()
	a, p, regP := sharingPair(t, rs, "once")
	defer a.close()
	defer p.close()
	old := a.ctrl
	if err := old.ShareQueues(a.router.Cluster()); err != nil {
		t.Fatalf("the same replica again: %v, want nil", err)
	}
	if err := old.ShareQueues(p.router.Cluster()); err == nil {
		t.Fatal("a second replica was taken")
	}
	old.Close()
	if err := old.ShareQueues(a.router.Cluster()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}

	next, det := newSharingController(t, a)
	defer next.Close()
	if err := old.ShareQueues(a.router.Cluster()); !errors.Is(err, ErrClosed) { // late: must not displace next
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	requireQueueReachesPeer(t, next, det, regP)
}

// A Controller that replaced another on a replica takes the replica's
// sharing over, and the replaced one's Close, coming after, leaves it
// alone: the new Controller's queue still reaches the peers.
func TestShareQueuesCloseLeavesTheReplicaToItsNewController(t *testing.T) {
	defer leakcheck.Check(t)()
	rs := redistest.Start(t)
	defer func() { _ = rs.Stop() }()
	a, p, regP := sharingPair(t, rs, "handover")
	defer a.close()
	defer p.close()
	next, det := newSharingController(t, a)
	defer next.Close()
	a.ctrl.Close() // after next took the replica over
	requireQueueReachesPeer(t, next, det, regP)
}

// sharingPair starts replicas a and p of pool, p registering on regP, each
// Controller sharing its queues with its own replica.
func sharingPair(t *testing.T, rs *redistest.Server, pool string) (a, p *replica, regP *prometheus.Registry) {
	t.Helper()
	regP = prometheus.NewRegistry()
	a = newReplica(t, rs, pool, "a", true, telemetry.Set{})
	p = newReplica(t, rs, pool, "p", true, telemetry.Set{Registerer: regP})
	for _, r := range []*replica{p, a} {
		if err := r.ctrl.ShareQueues(r.router.Cluster()); err != nil {
			a.close()
			p.close()
			t.Fatal(err)
		}
	}
	return a, p, regP
}

// newSharingController is a Controller, deciding saturation by the switch
// it returns, that shares its queues with r's replica.
func newSharingController(t *testing.T, r *replica) (*Controller, *switchDetector) {
	t.Helper()
	det := newSwitch()
	c, err := New(Config{Objectives: []Objective{{Name: "chat", Priority: 1}, {Name: "batch", Priority: -1}}},
		Options{Detectors: []Detector{det}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ShareQueues(r.router.Cluster()); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c, det
}

// requireQueueReachesPeer queues a request on next and waits for the peer
// registering on regP to count it in its fleet gauge; next's Close then
// ends the request with ErrClosed.
func requireQueueReachesPeer(t *testing.T, next *Controller, det *switchDetector, regP *prometheus.Registry) {
	t.Helper()
	ep := kvroute.Endpoint{ID: "10.0.0.1:8000"}
	det.set(ep.ID, true)
	got := make(chan error, 1)
	go func() {
		got <- next.Admit(WithObjective(context.Background(), "chat"), tokensReq(16), []kvroute.Endpoint{ep})
	}()
	waitFor(t, func() bool { return next.Queued() == 1 })
	waitFor(t, func() bool { return fleetQueued(t, regP, "1") == 1 }) // next's queue reaches p through a
	next.Close()
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("queued request at Close: %v, want ErrClosed", err)
	}
}
