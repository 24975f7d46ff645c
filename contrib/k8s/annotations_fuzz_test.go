package k8s

import (
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/models"
)

// FuzzPodAnnotations feeds arbitrary port and models annotations and role
// label values (anyone who can create a pod in the pool's namespace writes
// them) to endpoint discovery (seed corpus in
// testdata/fuzz/FuzzPodAnnotations): it never panics; every rank's events
// and replay addresses are the pod's IP and a port in 1..65535, or absent
// with the problem marked; the role is a known one or none (an llm-d
// encode worker gives no endpoint); and the models read from the
// annotation, written back as a list, read back identically.
func FuzzPodAnnotations(f *testing.F) {
	f.Add("5557", "5558", "meta-llama/Llama-3.1-8B, qwen/Qwen3-8B", "decode", uint8(2))
	f.Add("65535", "65534", "m", "prefill", uint8(2))
	f.Add("0", "+80", ",,bad\x01name,", "bogus", uint8(1))
	f.Add("", "99999", strings.Repeat("m,", 80), "both", uint8(4))
	cfg := Config{EventsPortAnnotation: DefaultEventsPortAnnotation, ReplayPortAnnotation: DefaultReplayPortAnnotation,
		ModelsAnnotation: models.DefaultLabel}
	warn := newPodWarnings(slog.New(slog.DiscardHandler))
	f.Fuzz(func(t *testing.T, events, replay, served, role string, nports uint8) {
		p := pod("a", "10.0.0.1", map[string]string{disagg.DefaultRoleLabel: role}, true)
		p.Annotations = map[string]string{cfg.EventsPortAnnotation: events, cfg.ReplayPortAnnotation: replay, cfg.ModelsAnnotation: served}
		ports := []int32{8000, 8001, 8002, 8003, 8004}[:nports%5+1]
		var probs podProblems
		eps := podEndpoints(p, ports, cfg, warn, &probs)
		if role == roleEncode {
			if len(eps) != 0 {
				t.Fatalf("%d endpoints of an encode worker", len(eps))
			}
			return
		}
		if len(eps) != len(ports) {
			t.Fatalf("%d endpoints for %d ports", len(eps), len(ports))
		}
		for rank, ep := range eps {
			for _, addr := range []string{ep.EventsAddress, ep.ReplayAddress} {
				if addr == "" {
					if !probs[problemPortAnnotation] {
						t.Fatalf("rank %d: an address left out without the problem marked", rank)
					}
					continue
				}
				host, port, err := net.SplitHostPort(strings.TrimPrefix(addr, "tcp://"))
				n, perr := strconv.Atoi(port)
				if !strings.HasPrefix(addr, "tcp://") || err != nil || host != "10.0.0.1" || perr != nil || n < 1 || n > 65535 {
					t.Fatalf("rank %d: address %q (annotations %q, %q)", rank, addr, events, replay)
				}
			}
			if ep.Role != "" && disagg.ValidRole(ep.Role) != nil {
				t.Fatalf("role %q kept", ep.Role)
			}
			again, dropped := models.ParseList(strings.Join(ep.Models, ","), 0)
			if dropped != 0 || !slices.Equal(again, ep.Models) {
				t.Fatalf("models %q read back as %q (%d dropped)", ep.Models, again, dropped)
			}
		}
	})
}
