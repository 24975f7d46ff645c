package session

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute"
)

// ErrInvalidKey is returned, with Config.Strict, for a request whose
// session header or cookie is malformed: longer than Config.MaxKeyBytes, or
// holding a byte outside visible ASCII (0x21–0x7E). A gateway answers it
// with 400. Without Strict such a value is skipped and counted
// (kvroute_session_keys_total{source="invalid"}) and the request is routed
// without it.
var ErrInvalidKey = errors.New("session: malformed session key")

// Sources of a session key, the source label of
// kvroute_session_keys_total.
const (
	srcHeader  = iota // Config.Headers
	srcCookie         // Config.Cookie
	srcDerived        // Config.Derive
	srcNone           // no key
	srcInvalid        // a malformed header or cookie value, skipped
	srcHost           // Request.Session, set by the host
	numSources
)

var sourceNames = [numSources]string{"header", "cookie", "derived", "none", "invalid", "host"}

// Key returns req's session key: Request.Session when set, else the first
// well-formed value of Config.Headers, then of the cookie, then (with
// Config.Derive) a key derived from the body; "" when none. A malformed
// header or cookie value is skipped and counted, or, with Config.Strict,
// refused with ErrInvalidKey. Every call is counted in
// kvroute_session_keys_total by where the key came from (source "host"
// for Request.Session), so a host calls it once per request. It allocates
// only to derive a key.
//
// Key has no Router to render with: its derived key is the hash of the
// opening's text ("d:" and hex), not the block key the Profile derives.
// A host that runs the Selection stages itself and derives keys gets the
// same stickiness, not the same key.
func (a *Affinity) Key(req *kvroute.Request) (string, error) {
	return a.keyWith(req, func(r *kvroute.Request) string { return textKey(r.Body) })
}

// keyWith is Key with derive deriving the key from the body.
func (a *Affinity) keyWith(req *kvroute.Request, derive func(*kvroute.Request) string) (string, error) {
	if req.Session != "" {
		a.met.keys[srcHost].Inc()
		return req.Session, nil
	}
	k, src, skipped, err := a.key(req)
	if k == "" && err == nil && a.cfg.Derive {
		if k = derive(req); k != "" {
			src = srcDerived
		}
	}
	a.met.keys[src].Inc()
	if skipped && src != srcInvalid {
		a.met.keys[srcInvalid].Inc() // a malformed value was skipped before this source
	}
	return k, err
}

// key returns the header's or cookie's key and its source, and whether a
// malformed value was skipped on the way.
func (a *Affinity) key(req *kvroute.Request) (string, int, bool, error) {
	invalid := false
	for _, h := range a.cfg.Headers {
		vs := req.Header[h]
		if len(vs) == 0 {
			continue
		}
		if a.wellFormed(vs[0]) {
			return vs[0], srcHeader, invalid, nil
		}
		if a.cfg.Strict {
			return "", srcInvalid, true, fmt.Errorf("%w: header %s: %s", ErrInvalidKey, h, a.why(vs[0]))
		}
		invalid = true
	}
	if a.cfg.Cookie != "-" {
		if v, ok := cookieValue(req.Header, a.cfg.Cookie); ok {
			if a.wellFormed(v) {
				return v, srcCookie, invalid, nil
			}
			if a.cfg.Strict {
				return "", srcInvalid, true, fmt.Errorf("%w: cookie %s: %s", ErrInvalidKey, a.cfg.Cookie, a.why(v))
			}
			invalid = true
		}
	}
	if invalid {
		return "", srcInvalid, true, nil
	}
	return "", srcNone, false, nil
}

// wellFormed reports whether v may be a session key: 1 to MaxKeyBytes
// bytes of visible ASCII.
func (a *Affinity) wellFormed(v string) bool {
	if v == "" || len(v) > a.cfg.MaxKeyBytes {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

func (a *Affinity) why(v string) string {
	switch {
	case v == "":
		return "empty"
	case len(v) > a.cfg.MaxKeyBytes:
		return "longer than " + strconv.Itoa(a.cfg.MaxKeyBytes) + " bytes"
	default:
		return "holds a byte outside visible ASCII"
	}
}

// cookieValue returns the value of the named cookie in h's Cookie
// headers, without allocating (RFC 6265: "name=value" pairs separated by
// "; ", a value optionally in double quotes).
func cookieValue(h http.Header, name string) (string, bool) {
	for _, line := range h["Cookie"] {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			part = strings.TrimSpace(part)
			k, v, ok := strings.Cut(part, "=")
			if !ok || k != name {
				continue
			}
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return "", false
}
