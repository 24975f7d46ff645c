package kvevents

import (
	"net"
	"net/netip"

	"github.com/kvroute/kvroute/internal/endpointid"
)

// sourceAllowed reports whether the connection bc may deliver messages for
// the endpoint id (rank offset applied). In bind mode a topic names its
// endpoint, kv@<host:port>@<model>, and an engine's PUB connects from its
// pod, so its connection's source IP is <host>: the address the endpoint
// ID gives, whether the operator wrote it or discovery found it. A claim
// from any other address is refused unless PoolConfig.BindAnySource is set;
// without that check a peer elsewhere that sends an endpoint's topic first
// takes its stream whenever the engine's connection ends (a restart).
//
// Topics that the pool would not index anyway (an endpoint not passed to
// Ensure, without BindAnyTopic, or of another rank) are left to be counted
// as unknown, so the refusal count shows only attempts on indexed
// endpoints. A refused claim of a configured endpoint is logged at warning
// level once per connection (a misconfigured NAT or proxy shows there);
// one of a topic-named endpoint only at debug level.
func (b *binder) sourceAllowed(bc *bindConn, id string) bool {
	p := b.p
	if p.cfg.BindAnySource || sourceMatches(id, bc.from) {
		return true
	}
	p.mu.Lock()
	ep, known := b.known[id]
	indexed := (known && ep.Rank == bc.rank) || (!known && p.cfg.BindAnyTopic)
	p.mu.Unlock()
	if !indexed {
		return true // dropped as unknown by bindStream
	}
	if known && !bc.warned {
		bc.warned = true
		p.log.Warn("KV-event topic refused: the engine connection does not come from the endpoint's address "+
			"(set bindAnySource behind NAT or a proxy)", "endpoint", id, "remote", bc.from, "rank", bc.rank)
	} else {
		p.log.Debug("KV-event topic refused: the connection does not come from the endpoint's address",
			"remote", bc.from, "rank", bc.rank)
	}
	return false
}

// sourceMatches reports whether from is the IP address that the host of
// the endpoint ID id (host:port) spells. A host that is not an IP address
// matches nothing.
func sourceMatches(id string, from netip.Addr) bool {
	host, _, err := net.SplitHostPort(id)
	if err != nil {
		return false
	}
	want, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return from.IsValid() && want.Unmap().WithZone("") == from
}

// remoteIP is the IP address of a connection's peer, IPv4 unmapped and
// without zone; the zero Addr when a is not a TCP address.
func remoteIP(a net.Addr) netip.Addr {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Addr{}
	}
	return ip.Unmap()
}

// maxConns bounds the connections bind mode serves at once.
func (b *binder) maxConns() int { return 4*b.p.cfg.BindMaxStreams + 64 }

// maxConnsPerSource bounds the connections one source address holds at
// once: a quarter of maxConns, room for every stream bind mode creates plus
// reconnections, far above the one connection per rank an engine makes.
func (b *binder) maxConnsPerSource() int { return b.maxConns() / 4 }

// admitConn takes a connection slot for a connection from the address
// from, or reports that the connection must be refused. Connections that
// complete the ZMTP handshake and then say nothing, or answer heartbeats
// only, cost a peer nothing to keep open; without a bound per address one
// peer opening maxConns of them shut every engine out of the bind socket.
// With PoolConfig.BindAnySource the engines may all come through one
// address (NAT, a proxy), so only the total is bounded.
func (b *binder) admitConn(from netip.Addr) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns >= b.maxConns() {
		return false
	}
	if !b.p.cfg.BindAnySource {
		if b.perSrc[from] >= b.maxConnsPerSource() {
			return false
		}
		b.perSrc[from]++
	}
	b.conns++
	return true
}

// releaseConn returns the slot admitConn took for a connection from from.
func (b *binder) releaseConn(from netip.Addr) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.conns--
	if b.p.cfg.BindAnySource {
		return
	}
	if n := b.perSrc[from] - 1; n > 0 {
		b.perSrc[from] = n
	} else {
		delete(b.perSrc, from)
	}
}

// topicEndpointID reports whether id, an endpoint a topic names that was
// not passed to Ensure, may become a stream with BindAnyTopic: its ID
// labels every series of the endpoint and keys the index, so it is held to
// what Ensure accepts of an ID (endpointid.Check, host:port with a host).
// Anything else, such as bytes that are not UTF-8, which a Prometheus label
// refuses, is counted as an unknown topic.
func topicEndpointID(id string) bool {
	if endpointid.Check(id) != nil {
		return false
	}
	host, _, err := net.SplitHostPort(id)
	return err == nil && host != ""
}
