package sim

import (
	"math"
	"testing"
)

// smallOverload is a version of the overload study that takes a few
// seconds under -race: 2 engines, 300 requests, a fixed capacity (about
// what two engines serve on this traffic).
func smallOverload(load float64) OverloadConfig {
	oc := DefaultOverloadConfig(load)
	oc.Base.Fleet.Engines = 2
	oc.Workload.Requests = 300
	oc.Workload.GroupsPerFlow, oc.Workload.UsersPerGroup = 4, 8
	oc.Capacity = 30
	return oc
}

// TestOverloadAdmissionInvariants runs the admission through a small
// overload run and checks what the Controller promises: higher bands
// first, no interactive request refused while batch requests wait, fair
// shares between the two interactive tenants under contention, and the
// same result on every run.
func TestOverloadAdmissionInvariants(t *testing.T) {
	oc := smallOverload(2)
	r, err := RunOverload(oc, OverloadAdmission)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.Interactive.Offered+r.Batch.Offered != oc.Workload.Requests {
		t.Fatalf("offered %d + %d, want %d", r.Interactive.Offered, r.Batch.Offered, oc.Workload.Requests)
	}
	if r.PriorityInversions != 0 {
		t.Errorf("%d batch releases while interactive requests stayed queued", r.PriorityInversions)
	}
	if r.InteractiveRefusedWhileBatchQueued != 0 {
		t.Errorf("%d interactive refusals while batch requests were queued", r.InteractiveRefusedWhileBatchQueued)
	}
	if r.Batch.refused() == 0 {
		t.Errorf("no batch request shed at 2× capacity: the admission never saw saturation")
	}
	if n := r.Interactive.refused(); n != 0 {
		t.Errorf("%d interactive requests refused", n)
	}
	if r.Interactive.Completed != r.Interactive.Offered {
		t.Errorf("interactive completed %d of %d", r.Interactive.Completed, r.Interactive.Offered)
	}
	again, err := RunOverload(oc, OverloadAdmission)
	if err != nil {
		t.Fatal(err)
	}
	again.Wall = r.Wall
	if again != r {
		t.Errorf("not deterministic:\n%+v\n%+v", r, again)
	}
}

// TestOverloadFairShare keeps both interactive tenants backlogged (90 %
// of the traffic interactive at twice the capacity) and checks that round
// robin between their fairness IDs gives each half of the releases made
// while both wait, although tenant A offers three times as many.
func TestOverloadFairShare(t *testing.T) {
	oc := smallOverload(2)
	oc.Workload.InteractiveFraction = 0.9
	oc.Workload.Requests = 600
	r, err := RunOverload(oc, OverloadAdmission)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tenant A %.3f of %d", r.TenantAShare, r.Contended)
	if r.Contended < 100 || math.Abs(r.TenantAShare-0.5) > 0.5*ShareTolerance {
		t.Errorf("tenant A has %.3f of %d contended releases, want 0.5 ± %.3f", r.TenantAShare, r.Contended, 0.5*ShareTolerance)
	}
	if r.PriorityInversions != 0 || r.InteractiveRefusedWhileBatchQueued != 0 {
		t.Errorf("%d priority inversions, %d interactive refusals with batch queued", r.PriorityInversions, r.InteractiveRefusedWhileBatchQueued)
	}
}

// TestOverloadPeersQueueing checks Dynamo's router queue on the same small
// run: it refuses nothing (busy-threshold rejection is off by default),
// serves every request, and, first come first served within a tier, gives
// tenant A its offered share of the interactive requests.
func TestOverloadPeersQueueing(t *testing.T) {
	oc := smallOverload(2)
	for _, p := range []OverloadPolicy{OverloadDynamo} {
		r, err := RunOverload(oc, p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", p, r)
		if r.Batch.refused()+r.Interactive.refused() != 0 {
			t.Errorf("%s refused requests", p)
		}
		if r.Interactive.Completed+r.Batch.Completed != oc.Workload.Requests {
			t.Errorf("%s completed %d of %d", p, r.Interactive.Completed+r.Batch.Completed, oc.Workload.Requests)
		}
		if math.Abs(r.DispatchedAShare-0.75) > 0.06 {
			t.Errorf("%s: tenant A has %.3f of dispatched interactive requests, want about the offered 0.75", p, r.DispatchedAShare)
		}
	}
}

// TestOverloadDispatchGate runs the small overload at twice its capacity
// with and without the admission's dispatch gate: with it, batch requests
// wait at the gateway instead of in the engines' queues, so the
// interactive TTFT p90 drops, nothing is released out of priority order,
// and the pick, which the gate does not change, keeps its hit rate.
func TestOverloadDispatchGate(t *testing.T) {
	on := smallOverload(2)
	off := on
	off.Gate = false
	ron, err := RunOverload(on, OverloadAdmission)
	if err != nil {
		t.Fatal(err)
	}
	roff, err := RunOverload(off, OverloadAdmission)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gate on: p90 %v hit %.3f batch shed %.3f; off: p90 %v hit %.3f batch shed %.3f",
		ron.InteractiveTTFTP90, ron.HitRate, ron.BatchShedRate, roff.InteractiveTTFTP90, roff.HitRate, roff.BatchShedRate)
	if ron.InteractiveTTFTP90 < 0 || roff.InteractiveTTFTP90 >= 0 && ron.InteractiveTTFTP90 >= roff.InteractiveTTFTP90 {
		t.Errorf("interactive TTFT p90 %v with the gate, %v without: the gate did not lower it", ron.InteractiveTTFTP90, roff.InteractiveTTFTP90)
	}
	if ron.PriorityInversions != 0 || ron.InteractiveRefusedWhileBatchQueued != 0 || ron.Interactive.refused() != 0 {
		t.Errorf("%d inversions, %d interactive refusals with batch queued, %d interactive refused",
			ron.PriorityInversions, ron.InteractiveRefusedWhileBatchQueued, ron.Interactive.refused())
	}
	if ron.HitRate < roff.HitRate-0.03 {
		t.Errorf("hit rate %.3f with the gate, %.3f without", ron.HitRate, roff.HitRate)
	}
	if ron.Interactive.Completed != ron.Interactive.Offered {
		t.Errorf("interactive completed %d of %d", ron.Interactive.Completed, ron.Interactive.Offered)
	}
}
