package sidecar

import (
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/kvroute/kvroute/internal/h1pool"
)

// target is where a prefill request goes: hostPort, the address
// Options.AllowTarget vets, and base, the prefiller's base URL when the
// caller knows it ("": Config.PrefillerScheme and hostPort). bad is a base
// URL that was unusable, for the fallback's cause; over, when not nil,
// says the body is over Config.MaxBodyBytes, so that it goes to no
// prefiller (ReasonBodyTooLarge).
type target struct {
	hostPort, base, bad string
	over                error
}

// baseTarget is the target of a prefiller at base, an http or https URL
// with an optional path prefix and nothing else.
func baseTarget(base string) target {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return target{bad: base}
	}
	return target{hostPort: h1pool.HostPort(base), base: u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")}
}

// url is the prefill request's URL for path (which starts with "/").
func (t target) url(scheme, path string) string {
	if t.base != "" {
		return t.base + path
	}
	return scheme + "://" + t.hostPort + path
}

// maxTargetLen bounds a prefiller address (a DNS name is at most 253
// bytes, plus the port).
const maxTargetLen = 261

// ValidTarget reports whether hostPort is a usable prefiller address: a
// host and a port of 1 to 65535 in decimal digits, nothing else. The host
// is an IPv4 address, an IPv6 address in brackets (no zone), or a DNS name
// (labels of letters, digits, hyphens and underscores, none starting or
// ending with a hyphen, an optional final dot). No scheme, path, user
// info, control character, space or other punctuation gets through, so
// an Options.AllowTarget sees only addresses the prefill request's URL
// carries exactly.
func ValidTarget(hostPort string) bool {
	if len(hostPort) == 0 || len(hostPort) > maxTargetLen {
		return false
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || !validPort(port) {
		return false
	}
	if hostPort[0] == '[' {
		a, err := netip.ParseAddr(host)
		return err == nil && a.Is6() && a.Zone() == ""
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Is4()
	}
	return validHostName(host)
}

// validPort reports whether port is 1 to 65535 in at most five decimal
// digits (strconv.Atoi would take a sign, and many leading zeros).
func validPort(port string) bool {
	if len(port) == 0 || len(port) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(port); i++ {
		c := port[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n >= 1 && n <= 65535
}

// validHostName reports whether host is a DNS name: dot-separated labels
// of 1 to 63 letters, digits, hyphens or underscores, none starting or
// ending with a hyphen, with an optional final dot.
func validHostName(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > 253 {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
