package sidecar

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
)

// AllowNetworks returns an Options.AllowTarget that admits a prefiller
// address only when its host is an IP address inside one of prefixes and,
// when ports is not empty, its port is one of ports. A host name is
// refused: resolving it would let whoever controls its DNS answer choose
// the address the sidecar sends request bodies to. The routers kvroute
// and llm-d run name prefillers by pod IP, so a pod network's prefixes
// (and the engines' ports) admit every legitimate prefiller and nothing
// outside the pool: a client that reaches the sidecar directly cannot
// make it post requests to an arbitrary host (server-side request
// forgery). IPv4-mapped IPv6 addresses are matched as IPv4.
func AllowNetworks(prefixes []netip.Prefix, ports []int) func(hostPort string) bool {
	pfx := make([]netip.Prefix, len(prefixes))
	for i, p := range prefixes {
		pfx[i] = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-unmapBits(p)).Masked()
	}
	ps := slices.Clone(ports)
	return func(hostPort string) bool {
		host, port, err := net.SplitHostPort(hostPort)
		if err != nil {
			return false
		}
		addr, err := netip.ParseAddr(host)
		if err != nil || addr.Zone() != "" {
			return false
		}
		if len(ps) > 0 {
			p, err := strconv.Atoi(port)
			if err != nil || !slices.Contains(ps, p) {
				return false
			}
		}
		addr = addr.Unmap()
		return slices.ContainsFunc(pfx, func(p netip.Prefix) bool { return p.Contains(addr) })
	}
}

// unmapBits is how many of p's bits Unmap drops: 96 for an IPv4-mapped
// IPv6 prefix of at least 96 bits, 0 otherwise.
func unmapBits(p netip.Prefix) int {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return 96
	}
	return 0
}
