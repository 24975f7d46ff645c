package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// parseNetworks reads --allowed-prefiller-networks: comma-separated CIDR
// prefixes or single IP addresses (a /32 or /128).
func parseNetworks(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p)
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is neither a CIDR prefix nor an IP address", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no network in %q", v)
	}
	return out, nil
}

// parsePorts reads --allowed-prefiller-ports: comma-separated ports.
func parsePorts(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("%q is not a port", f)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no port in %q", v)
	}
	return out, nil
}
