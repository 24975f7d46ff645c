package extproc

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute"
)

// subsetFilter is the subset hint's entries, ready to match endpoints by. An
// entry is "ip:port" (one endpoint) or a bare "ip" (every endpoint on that
// address: each data-parallel rank of a pod), as the Inference Extension's
// reference picker reads them; addresses compare as addresses, so that
// "[fd00::1]:8000" and "[fd00:0::1]:8000" name one endpoint. An entry that
// is no address names the endpoint with exactly that ID.
type subsetFilter struct {
	ids   map[string]struct{}         // every entry as written
	ports map[netip.AddrPort]struct{} // "ip:port" entries
	hosts map[netip.Addr]struct{}     // bare "ip" entries
}

func newSubsetFilter(entries []string) *subsetFilter {
	f := &subsetFilter{ids: make(map[string]struct{}, len(entries))}
	for _, e := range entries {
		f.ids[e] = struct{}{}
		if ap, err := netip.ParseAddrPort(e); err == nil {
			if f.ports == nil {
				f.ports = make(map[netip.AddrPort]struct{})
			}
			f.ports[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = struct{}{}
			continue
		}
		if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(e, "["), "]")); err == nil {
			if f.hosts == nil {
				f.hosts = make(map[netip.Addr]struct{})
			}
			f.hosts[a.Unmap()] = struct{}{}
		}
	}
	return f
}

// admits reports whether the hint names the endpoint with this ID.
func (f *subsetFilter) admits(id string) bool {
	if _, ok := f.ids[id]; ok {
		return true
	}
	if f.ports == nil && f.hosts == nil {
		return false
	}
	host, port, err := net.SplitHostPort(id)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	if _, ok := f.hosts[a]; ok {
		return true
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return false
	}
	_, ok := f.ports[netip.AddrPortFrom(a, uint16(p))]
	return ok
}

// subsetCandidates returns the endpoints of eps the hint's entries name, in
// eps's order.
func subsetCandidates(entries []string, eps []kvroute.Endpoint) []kvroute.Endpoint {
	f := newSubsetFilter(entries)
	out := make([]kvroute.Endpoint, 0, min(len(entries), len(eps)))
	for _, ep := range eps {
		if f.admits(ep.ID) {
			out = append(out, ep)
		}
	}
	return out
}
