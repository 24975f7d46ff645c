package extproc

import (
	"net"
	"net/netip"
	"strings"

	"github.com/kvroute/kvroute"
)

// servedMissing is what ConformanceServedHeader says when Envoy did not
// report the served endpoint, the reference picker's words: the suite's
// check then fails, as it should, instead of reading the picker's own pick.
const servedMissing = "fail: missing destination endpoint served metadata"

// conformanceSelection restricts eps to those the conformance suite's
// selection header names, in the header's order: an "ip" entry (IPv6 with or
// without brackets) names every endpoint on that address (each data-parallel
// rank of a pod), in eps's order; an "ip:port" entry names that endpoint
// only. An endpoint named twice counts once. ok is false when the header is
// absent or empty: every endpoint stays a candidate.
func conformanceSelection(values []string, eps []kvroute.Endpoint) (out []kvroute.Endpoint, ok bool) {
	var entries []string
	for _, v := range values {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
	}
	if len(entries) == 0 {
		return nil, false
	}
	type hostPort struct{ host, port string }
	addrs := make([]hostPort, len(eps))
	for i, ep := range eps {
		addrs[i].host, addrs[i].port, _ = net.SplitHostPort(ep.ID) // "" for an ID that is no address: never named
	}
	taken := make([]bool, len(eps))
	for _, e := range entries {
		if len(out) == len(eps) {
			break // every endpoint named: the rest can add nothing
		}
		host, port, err := net.SplitHostPort(e)
		if err != nil { // no port: "10.0.0.7", "fd00::1" or "[fd00::1]"
			host, port = strings.TrimSuffix(strings.TrimPrefix(e, "["), "]"), ""
		}
		for i, a := range addrs {
			if taken[i] || a.host == "" || !sameHost(host, a.host) || (port != "" && port != a.port) {
				continue
			}
			taken[i] = true
			out = append(out, eps[i])
		}
	}
	return out, true
}

// sameHost compares two hosts as addresses when both are IP addresses (so
// that "fd00::1" and "fd00:0::1" agree), else as strings.
func sameHost(a, b string) bool {
	pa, errA := netip.ParseAddr(a)
	pb, errB := netip.ParseAddr(b)
	if errA == nil && errB == nil {
		return pa.Unmap() == pb.Unmap()
	}
	return a == b
}
