package session

import (
	"encoding/base64"
	"net/http"
	"time"

	"github.com/kvroute/kvroute"
)

// The session cookie. llm-d's session-affinity scorer answers each
// response with
//
//	Set-Cookie: llm-d-session=<base64 of the endpoint's name>; Path=/; HttpOnly; SameSite=Lax
//
// (standard base64 with padding; Max-Age when configured) and, on the next
// request, prefers the endpoint the cookie names. kvroute writes the same
// cookie, naming its endpoint by its ID ("ip:port"), and reads it both
// ways: a cookie that names one of the candidates (CookieValue of its ID)
// is a pointer to that endpoint, with no entry in the store, so it holds on
// every replica and after a restart; any other value (llm-d's names a pod
// as namespace/name) is an opaque session key looked up in the store.

// CookieValue is the value of the session cookie naming endpoint, as
// llm-d's session-affinity scorer writes it: the standard base64 encoding
// (with padding) of the endpoint's name, here its ID.
func CookieValue(endpoint string) string {
	return b64.EncodeToString([]byte(endpoint))
}

// names reports whether key is CookieValue(id), without allocating.
func names(key, id string) bool {
	if id == "" || len(key) != (len(id)+2)/3*4 {
		return false
	}
	j := 0
	for i := 0; i < len(id); i += 3 {
		n := min(3, len(id)-i)
		var v uint32
		for k := range 3 {
			v <<= 8
			if k < n {
				v |= uint32(id[i+k])
			}
		}
		for k := range 4 {
			c := byte('=')
			if k <= n {
				c = b64Alphabet[v>>(18-6*k)&0x3f]
			}
			if key[j] != c {
				return false
			}
			j++
		}
	}
	return true
}

// named returns the candidate whose ID key names (a session cookie kvroute
// or a compatible router set), or "".
func named(key string, endpoints []kvroute.Endpoint) string {
	for i := range endpoints {
		if names(key, endpoints[i].ID) {
			return endpoints[i].ID
		}
	}
	return ""
}

// ResponseCookie returns the Set-Cookie header value a host adds to the
// response of req, served by endpoint, and true when one is due:
// session affinity sets cookies (Config.SetCookie, on unless the cookie
// is "-"), and req had no session key (a key derived from its body,
// Config.Derive, is one: it keeps the conversation apart from the
// client's others, which a cookie, read before derivation, would not),
// or its key was its session cookie and that cookie does not name
// endpoint (the session moved: llm-d's rule, set the cookie when it is
// absent or different). A client that keeps cookies then sends it with
// its next turn, which prefers endpoint. Each cookie returned is
// counted (kvroute_session_cookies_set_total). req is the Request the
// Router picked (its Session set by the profile).
func (a *Affinity) ResponseCookie(req *kvroute.Request, endpoint string) (string, bool) {
	if a == nil || !a.setCookie || endpoint == "" {
		return "", false
	}
	if req.Session != "" {
		v, ok := cookieValue(req.Header, a.cfg.Cookie)
		if !ok || v != req.Session || names(v, endpoint) {
			return "", false
		}
	}
	c := http.Cookie{Name: a.cfg.Cookie, Value: CookieValue(endpoint), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, MaxAge: int(a.cfg.CookieMaxAge / time.Second)}
	a.met.cookies.Inc()
	return c.String(), true
}

// Served records that endpoint, not the one picked, served req: a host
// that learns it after the pick (Envoy retried down the fallback list)
// calls it so that the session's next turn prefers where its blocks are.
// A key that is the request's session cookie is not stored: the response's
// cookie (ResponseCookie) names the endpoint instead.
func (a *Affinity) Served(req *kvroute.Request, endpoint string) {
	if a == nil || req.Session == "" {
		return
	}
	if v, ok := cookieValue(req.Header, a.cfg.Cookie); ok && v == req.Session {
		return
	}
	a.Record(req.Session, endpoint)
}

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

var b64 = base64.StdEncoding
