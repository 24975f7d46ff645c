package checkpoint

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// authScheme is the Authorization scheme of a bootstrap's proof of the
// token: "KVRoute-HMAC t=<unix seconds>, mac=<hex>", where mac is
// HMAC-SHA256, keyed with the token, of authLabel, t and the canonical form
// of the URL requested, each ended by a newline. The token itself never
// leaves the process: a proof opens only the URL it names, and only within
// the allowed clock skew of t.
const (
	authScheme = "KVRoute-HMAC"
	authLabel  = "kvroute-snapshot-v1"
)

// snapshotAuthorization is the Authorization header value that proves
// token for a GET of rawURL at time at.
func snapshotAuthorization(token, rawURL string, at time.Time) string {
	t := at.Unix()
	return authScheme + " t=" + strconv.FormatInt(t, 10) + ", mac=" + hex.EncodeToString(snapshotMAC(token, canonicalURL(rawURL), t))
}

// snapshotMAC is the mac of a proof of token for the canonical URL u at t.
func snapshotMAC(token, u string, t int64) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(authLabel + "\n" + strconv.FormatInt(t, 10) + "\n" + u + "\n"))
	return m.Sum(nil)
}

// canonicalURL is the form of an http(s) URL both ends of a bootstrap
// compute the mac over: the scheme in lower case, the host as canonicalHost
// has it, then the path and query as sent on the request line ("/" for an
// empty path); a fragment is not sent and not included. A URL that does
// not parse is used as it is.
func canonicalURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.ToLower(u.Scheme) + "://" + canonicalHost(u.Host) + u.RequestURI()
}

// canonicalHost is a host[:port] as the Host header carries it: Go's HTTP
// client leaves out an empty port ("h:" is sent as "h") and an IPv6 zone
// ("[fe80::1%eth0]" is sent as "[fe80::1]"), so a proof signed over the
// URL a peer is configured with must not hold them either, or a replica
// that advertises no URL (and checks the Host it is asked with) refuses
// it. In lower case, as host names compare.
func canonicalHost(h string) string {
	h = strings.ToLower(h)
	if end := strings.LastIndexByte(h, ']'); strings.HasPrefix(h, "[") && end > 0 {
		if zone := strings.LastIndexByte(h[:end], '%'); zone > 0 {
			h = h[:zone] + h[end:]
		}
	}
	if strings.LastIndexByte(h, ':') > strings.LastIndexByte(h, ']') {
		h = strings.TrimSuffix(h, ":")
	}
	return h
}

// requestPath is the path of the request's target as the client sent it
// (a handler mounted under http.StripPrefix sees another URL.Path).
func requestPath(req *http.Request) string {
	if u, err := url.ParseRequestURI(req.RequestURI); err == nil {
		return u.EscapedPath()
	}
	return req.URL.EscapedPath()
}

// requestedURL is the canonical URL the request names, built from its
// Host and target: what a replica that advertises no snapshot URL checks
// proofs against.
func requestedURL(req *http.Request) string {
	scheme := "http"
	if req.TLS != nil {
		scheme = "https"
	}
	target := req.RequestURI
	if !strings.HasPrefix(target, "/") { // absolute-form
		return canonicalURL(target)
	}
	return scheme + "://" + canonicalHost(req.Host) + target
}

// authOutcome is what the handler makes of a request's Authorization.
type authOutcome int

const (
	authOK       authOutcome = iota
	authLegacy               // a plain Bearer token (an older replica), accepted for one release
	authRefused              // no valid proof
	authClockOff             // a valid proof dated beyond the allowed skew
)

// checkAuth checks a request's Authorization against token: a proof
// (authScheme) for self — the canonical URL this replica advertises, or
// when it advertises none, the URL the request names — whose path the
// request's must be, dated within skew of now; or a plain Bearer token.
// Every comparison of secret material is in constant time.
func checkAuth(req *http.Request, token, self string, now time.Time, skew time.Duration) authOutcome {
	auth := req.Header.Get("Authorization")
	if got, ok := bearerToken(auth); ok {
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 {
			return authLegacy
		}
		return authRefused
	}
	t, mac, ok := parseProof(auth)
	if !ok {
		return authRefused
	}
	u := requestedURL(req)
	if self != "" {
		su, err := url.Parse(self)
		if err != nil || requestPath(req) != su.EscapedPath() && (su.EscapedPath() != "" || requestPath(req) != "/") {
			return authRefused
		}
		u = canonicalURL(self)
	}
	if !hmac.Equal(mac, snapshotMAC(token, u, t)) {
		return authRefused
	}
	if d := now.Sub(time.Unix(t, 0)); d > skew || d < -skew {
		return authClockOff
	}
	return authOK
}

// parseProof reads "KVRoute-HMAC t=<n>, mac=<hex>" (the scheme's name in
// any case, the parameters in any order).
func parseProof(auth string) (int64, []byte, bool) {
	scheme, params, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, authScheme) {
		return 0, nil, false
	}
	var t int64
	var mac []byte
	var haveT, haveMAC bool
	for p := range strings.SplitSeq(params, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return 0, nil, false
		}
		var err error
		switch strings.ToLower(k) {
		case "t":
			t, err = strconv.ParseInt(v, 10, 64)
			haveT = err == nil
		case "mac":
			mac, err = hex.DecodeString(v)
			haveMAC = err == nil && len(mac) == sha256.Size
		}
		if err != nil {
			return 0, nil, false
		}
	}
	return t, mac, haveT && haveMAC
}
