package k8s

import (
	"cmp"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/models"
)

// podReady reports whether a pod may receive traffic: running, with an IP,
// Ready, and not being deleted.
func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podEndpoints returns one endpoint per target port of a Ready pod,
// records in probs what it had to work around and warns of it (once per
// value, see podWarnings), limited to the ports its active-ports
// annotation lists when it has one (activePorts). A pod whose status.podIP is no IP address gives
// none: the IP is the host of its endpoint IDs, which label the router's
// per-endpoint series, and nothing else bounds it. Nor does an llm-d
// encode worker (role label encode).
func podEndpoints(p *corev1.Pod, ports []int32, cfg Config, warn *podWarnings, probs *podProblems) []kvroute.Endpoint {
	if net.ParseIP(p.Status.PodIP) == nil {
		probs[problemPodIP] = true
		ip := p.Status.PodIP
		warn.warn(p, "status.podIP", ip, "k8s: leaving out a Ready pod whose status.podIP is not an IP address",
			"podIP", ip[:min(len(ip), maxLoggedIP)], "bytes", len(ip))
		return nil
	}
	if p.Labels[cmp.Or(cfg.RoleLabel, disagg.DefaultRoleLabel)] == roleEncode {
		return nil // neither prefills nor decodes: llm-d's role filters refuse it both parts
	}
	active := activePorts(p, ports, warn, probs)
	events, evOK := annotationPort(p, cfg.EventsPortAnnotation, len(ports), warn, probs)
	replay, rpOK := annotationPort(p, cfg.ReplayPortAnnotation, len(ports), warn, probs)
	role, ok := disagg.RoleFromLabels(p.Labels, cfg.RoleLabel)
	if !ok {
		probs[problemRole] = true
		label := cmp.Or(cfg.RoleLabel, disagg.DefaultRoleLabel)
		warn.warn(p, "label "+label, p.Labels[label], "k8s: unknown role label value, serving both roles",
			"label", label, "value", p.Labels[label], "want", []string{disagg.RolePrefill, disagg.RoleDecode, disagg.RoleBoth})
	}
	var served []string
	if v, ok := p.Annotations[cfg.ModelsAnnotation]; ok {
		var dropped int
		if served, dropped = models.ParseList(v, 0); dropped > 0 {
			probs[problemModelsAnnotation] = true
			warn.warn(p, "annotation "+cfg.ModelsAnnotation, v, "k8s: model names left out of a models annotation (invalid, repeated, or beyond the bound)",
				"annotation", cfg.ModelsAnnotation, "kept", served)
		}
	}
	out := make([]kvroute.Endpoint, 0, len(ports))
	for rank, port := range ports {
		if active != nil && !active[rank] {
			continue
		}
		ep := kvroute.Endpoint{
			ID:     net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port))),
			Labels: maps.Clone(p.Labels),
			Rank:   rank,
			Role:   role,
			Models: slices.Clone(served),
		}
		if evOK {
			ep.EventsAddress = "tcp://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(events+rank))
		}
		if rpOK {
			ep.ReplayAddress = "tcp://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(replay+rank))
		}
		out = append(out, ep)
	}
	return out
}

// roleEncode is llm-d's role label value for an encode-only worker (the
// first stage of its encode/prefill/decode disaggregation), which serves
// no request kvroute routes.
const roleEncode = "encode"

// The pod annotations that list the target ports a pod serves, as llm-d's
// and the Inference Extension's pickers read them: llm-d's, else the
// Inference Extension's (which llm-d still reads).
const (
	activePortsAnnotation       = "llm-d.ai/active-ports"
	legacyActivePortsAnnotation = "inference.networking.k8s.io/active-ports"
)

// activePorts reads a pod's active-ports annotation, a comma-separated
// list of the target ports it serves (a data-parallel pod whose ranks are
// not all up): which of ports are active, by rank; nil, every one, when
// the pod has no such annotation. An entry that is no port among ports is
// left out, marked in probs and warned of (once per value); an annotation
// with none of ports leaves the pod no endpoint, as in llm-d, and one that
// lists no port at all (empty, or separators only) is marked and warned of
// too, so that a pod left out by it does not go unnoticed.
func activePorts(p *corev1.Pod, ports []int32, warn *podWarnings, probs *podProblems) []bool {
	key := activePortsAnnotation
	v, ok := p.Annotations[key]
	if !ok {
		key = legacyActivePortsAnnotation
		if v, ok = p.Annotations[key]; !ok {
			return nil
		}
	}
	active := make([]bool, len(ports))
	var listed, bad int
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		listed++
		n, err := strconv.Atoi(s)
		rank := slices.Index(ports, int32(n))
		if err != nil || n < 1 || n > 65535 || rank < 0 {
			bad++
			continue
		}
		active[rank] = true
	}
	if listed == 0 {
		probs[problemActivePorts] = true
		warn.warn(p, "annotation "+key, v, "k8s: active-ports annotation lists no port: the pod gets no endpoint",
			"annotation", key, "targetPorts", ports)
	}
	if bad > 0 {
		probs[problemActivePorts] = true
		warn.warn(p, "annotation "+key, v, "k8s: active-ports annotation entries that are no target port of the pool are left out",
			"annotation", key, "entries", bad, "targetPorts", ports)
	}
	return active
}

// maxLoggedIP is how much of a malformed status.podIP a warning shows.
const maxLoggedIP = 64

// annotationPort reads a port annotation, the port of rank 0 of a pod with
// ranks ranks (rank r uses the port plus r); a malformed one, or one whose
// last rank's port would pass 65535, is warned of, marked in probs and
// ignored (the router's configured port applies).
func annotationPort(p *corev1.Pod, key string, ranks int, warn *podWarnings, probs *podProblems) (int, bool) {
	v, ok := p.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535-max(ranks-1, 0) {
		probs[problemPortAnnotation] = true
		warn.warn(p, "annotation "+key, v, "k8s: ignoring a malformed port annotation (not a port, or its last rank's port would pass 65535)",
			"annotation", key, "ranks", ranks)
		return 0, false
	}
	return n, true
}

func endpointEqual(a, b kvroute.Endpoint) bool {
	return a.ID == b.ID && a.Rank == b.Rank && a.Address == b.Address &&
		a.EventsAddress == b.EventsAddress && a.ReplayAddress == b.ReplayAddress && a.Role == b.Role &&
		maps.Equal(a.Labels, b.Labels) && slices.Equal(a.Models, b.Models)
}

// Matcher turns a Kubernetes label selector into the label matcher kvroute's
// event-subscription selector takes, so that exactly Kubernetes' semantics
// decide which endpoints are subscribed.
func Matcher(sel labels.Selector) func(map[string]string) bool {
	return func(l map[string]string) bool { return sel.Matches(labels.Set(l)) }
}
