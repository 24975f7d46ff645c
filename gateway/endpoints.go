package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/endpointid"
	"github.com/kvroute/kvroute/internal/jsonconf"
	"github.com/kvroute/kvroute/internal/labelselector"
	"github.com/kvroute/kvroute/internal/zmqx"
)

// ErrInvalidEndpoints is wrapped by every error of ParseEndpoints and
// LoadEndpoints.
var ErrInvalidEndpoints = errors.New("gateway: invalid endpoints")

// ParseEndpoints parses a comma-separated list of engine addresses,
// "host:port,host:port", as given to the gateway's --endpoints flag. Each
// address becomes an Endpoint whose ID is the address itself: it must be the
// ip:port the engine's KV events name (kv@<ip:port>@<model>).
func ParseEndpoints(list string) ([]kvroute.Endpoint, error) {
	var eps []kvroute.Endpoint
	for part := range strings.SplitSeq(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		eps = append(eps, kvroute.Endpoint{ID: part})
	}
	if err := validateEndpoints(eps); err != nil {
		return nil, err
	}
	return eps, nil
}

// LoadEndpoints decodes an endpoints file: a JSON array of objects with
// "id" (ip:port, required), "address" (base URL, default "http://"+id) and
// "labels" (string map, matched by the events selector; each key and value
// must be one Kubernetes would take on a pod), "role"
// (prefill, decode or both; see package disagg), and the KV-event sockets:
// "eventsAddress", "replayAddress" and "snapshotAddress" (tcp://host:port)
// and "rank" (the data-parallel rank; over 65535 only with an
// eventsAddress, since the default addresses add it to a port). The file is read by the
// rules of every kvroute configuration, so that a mistyped file fails
// instead of routing to a different fleet: a key must be exactly a field's
// JSON name ("ID" is an unknown key, not "id"), an unknown or repeated key is
// an error naming its path, such as [1].labels, nothing may follow the
// array, and a file over 16 MiB is refused.
//
//	[{"id": "10.0.0.7:8000", "labels": {"zone": "a"}},
//	 {"id": "10.0.0.8:8000", "address": "http://10.0.0.8:8000"}]
func LoadEndpoints(r io.Reader) ([]kvroute.Endpoint, error) {
	var eps []kvroute.Endpoint
	if err := jsonconf.Decode(r, &eps); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEndpoints, err)
	}
	if err := validateEndpoints(eps); err != nil {
		return nil, err
	}
	for i := range eps { // "labels": {} and "models": [] say what their absence says
		if len(eps[i].Labels) == 0 {
			eps[i].Labels = nil
		}
		if len(eps[i].Models) == 0 {
			eps[i].Models = nil
		}
	}
	return eps, nil
}

// validateEndpoints checks that there is at least one endpoint, that IDs are
// host:port with a numeric port, at most endpointid.MaxBytes of UTF-8 (an
// ID is a label value of the per-endpoint metrics) and unique, that labels
// are Kubernetes label keys and values, and that addresses are http(s) base
// URLs, that a rank is not negative and, without an eventsAddress, at
// most 65535 (it offsets a port) and that the socket addresses (eventsAddress, replayAddress,
// snapshotAddress) are tcp://host:port, so that a mistake in a file is
// reported when it is loaded rather than when the router subscribes. An ID
// over the bound is named by its entry's index and shown cut.
func validateEndpoints(eps []kvroute.Endpoint) error {
	if len(eps) == 0 {
		return fmt.Errorf("%w: no endpoints", ErrInvalidEndpoints)
	}
	seen := make(map[string]bool, len(eps))
	for i, e := range eps {
		if err := endpointid.Check(e.ID); err != nil {
			return fmt.Errorf("%w: [%d]: %w", ErrInvalidEndpoints, i, err)
		}
		host, port, err := net.SplitHostPort(e.ID)
		if err != nil || host == "" {
			return fmt.Errorf("%w: id %q is not host:port", ErrInvalidEndpoints, e.ID)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return fmt.Errorf("%w: id %q has an invalid port", ErrInvalidEndpoints, e.ID)
		}
		if seen[e.ID] {
			return fmt.Errorf("%w: duplicate id %q", ErrInvalidEndpoints, e.ID)
		}
		seen[e.ID] = true
		if err := labelselector.CheckLabels(e.Labels); err != nil {
			return fmt.Errorf("%w: endpoint %s: %w", ErrInvalidEndpoints, e.ID, err)
		}
		if err := disagg.ValidRole(e.Role); err != nil {
			return fmt.Errorf("%w: endpoint %s: %w", ErrInvalidEndpoints, e.ID, err)
		}
		if e.Address != "" {
			u, err := url.Parse(e.Address)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("%w: endpoint %s: address %q is not an http(s) base URL", ErrInvalidEndpoints, e.ID, e.Address)
			}
		}
		if err := checkSockets(e); err != nil {
			return fmt.Errorf("%w: endpoint %s: %w", ErrInvalidEndpoints, e.ID, err)
		}
	}
	return nil
}

// maxRank bounds the rank of an endpoint whose eventsAddress is derived
// from it: vLLM adds the rank to a TCP port.
const maxRank = 65535

// checkSockets checks e's rank and its KV-event socket addresses as the
// router does when it subscribes (Router.SetEndpoints), naming the key. A
// rank only offsets the ports of the addresses derived from it, so a rank
// past a port is refused only when eventsAddress, which the router always
// derives when it is missing, is not given; whether the replay and snapshot
// addresses are derived depends on the router's configuration, and the
// router refuses a derived port past 65535, naming the address.
func checkSockets(e kvroute.Endpoint) error {
	if e.Rank < 0 {
		return fmt.Errorf("negative rank %d", e.Rank)
	}
	if e.Rank > maxRank && e.EventsAddress == "" {
		return fmt.Errorf("rank %d is over %d, so eventsAddress cannot be derived from it: give eventsAddress", e.Rank, maxRank)
	}
	for _, a := range []struct{ key, addr string }{
		{"eventsAddress", e.EventsAddress}, {"replayAddress", e.ReplayAddress}, {"snapshotAddress", e.SnapshotAddress},
	} {
		if a.addr == "" {
			continue
		}
		if _, err := zmqx.Endpoint(a.addr); err != nil {
			return fmt.Errorf("%s: %w", a.key, err)
		}
	}
	return nil
}
