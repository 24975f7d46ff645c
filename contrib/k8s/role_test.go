package k8s

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// roles returns the last endpoint set's roles, "id=role" in ID order.
func (r *recorder) roles() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sets) == 0 {
		return nil
	}
	out := []string{}
	for _, e := range r.sets[len(r.sets)-1] {
		out = append(out, e.ID+"="+e.Role)
	}
	return out
}

func (f *fixture) eventuallyRoles(t *testing.T, want ...string) {
	t.Helper()
	require.Eventually(t, func() bool { return fmt.Sprint(f.rec.roles()) == fmt.Sprint(want) }, wait, 5*time.Millisecond,
		"want %v, have %v", want, f.rec.roles())
}

// Endpoints take their role from llm-d's role label (or the configured
// one); no label, or an unknown value, serves both; a pod relabelled at
// run time changes role in the next endpoint set.
func TestRoleFromPodLabel(t *testing.T) {
	defer leakcheck.Check(t)()
	role := func(r string) map[string]string {
		return map[string]string{"app": "vllm", disagg.DefaultRoleLabel: r}
	}
	f := newFixture(t, Config{Pool: "pool"}, []*corev1.Pod{
		pod("p", "10.0.0.1", role(disagg.RolePrefill), true),
		pod("d", "10.0.0.2", role(disagg.RoleDecode), true),
		pod("b", "10.0.0.3", map[string]string{"app": "vllm"}, true),
		pod("x", "10.0.0.4", role("prefil"), true),
	}, poolObj(PoolV1, "pool", v1Spec(8000)))
	defer f.d.Close()
	f.eventuallyRoles(t, "10.0.0.1:8000=prefill", "10.0.0.2:8000=decode", "10.0.0.3:8000=", "10.0.0.4:8000=")

	f.updatePod(t, pod("d", "10.0.0.2", role(disagg.RolePrefill), true))
	f.eventuallyRoles(t, "10.0.0.1:8000=prefill", "10.0.0.2:8000=prefill", "10.0.0.3:8000=", "10.0.0.4:8000=")
	f.updatePod(t, pod("b", "10.0.0.3", role(disagg.RoleDecode), true))
	f.eventuallyRoles(t, "10.0.0.1:8000=prefill", "10.0.0.2:8000=prefill", "10.0.0.3:8000=decode", "10.0.0.4:8000=")

	g := newFixture(t, Config{Pool: "pool", RoleLabel: "example.com/pd"}, []*corev1.Pod{
		pod("p", "10.0.0.1", map[string]string{"app": "vllm", "example.com/pd": "prefill", disagg.DefaultRoleLabel: "decode"}, true),
	}, poolObj(PoolV1, "pool", v1Spec(8000)))
	defer g.d.Close()
	g.eventuallyRoles(t, "10.0.0.1:8000=prefill")
}

// llm-d's role label takes more values than prefill, decode and both: its
// prefill-decode (both's successor) and encode-prefill-decode serve both
// roles, encode-prefill only prefills, and an encode worker serves neither
// (llm-d's decode and prefill filters both refuse it). None of them is an
// unknown role.
func TestLLMDRoleValues(t *testing.T) {
	defer leakcheck.Check(t)()
	role := func(r string) map[string]string {
		return map[string]string{"app": "vllm", disagg.DefaultRoleLabel: r}
	}
	f := newFixture(t, Config{Pool: "pool"}, []*corev1.Pod{
		pod("pd", "10.0.0.1", role("prefill-decode"), true),
		pod("epd", "10.0.0.2", role("encode-prefill-decode"), true),
		pod("ep", "10.0.0.3", role("encode-prefill"), true),
		pod("e", "10.0.0.4", role("encode"), true),
		pod("d", "10.0.0.5", role(disagg.RoleDecode), true),
	}, poolObj(PoolV1, "pool", v1Spec(8000)))
	defer f.d.Close()
	f.eventuallyRoles(t, "10.0.0.1:8000=both", "10.0.0.2:8000=both", "10.0.0.3:8000=prefill", "10.0.0.5:8000=decode")
	require.Zero(t, testutil.ToFloat64(f.d.met.problems[problemRole]), "llm-d's role values are no unknown role")
}
