package sidecar

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/textproto"
	"strings"
)

// PrefillerHeader carries the prefill endpoint ("host:port") to the decode
// pod, as llm-d's router sets it. Package disagg's HeaderPrefiller, the
// name kvroute's router sets, is this constant.
const PrefillerHeader = "x-prefiller-host-port"

// PrefillerHeaderLLMD is llm-d's current name of PrefillerHeader. llm-d's
// router writes both names with the same value, and its sidecar trusts the
// pre-convention one first (every router that strips client values strips
// that one); a router that has retired it writes only this one. The
// sidecar reads it when PrefillerHeader is absent, and kvroute's router
// writes both.
const PrefillerHeaderLLMD = "x-llm-d-prefiller-host-port"

// prefillerTarget is the prefill endpoint a request names: PrefillerHeader,
// else PrefillerHeaderLLMD (llm-d's order of trust). Of a comma-separated
// list (a proxy may join repeated header lines into one, RFC 9110 §5.3),
// the first is taken, as llm-d's sidecar takes it.
func prefillerTarget(h http.Header) string {
	if t := firstListed(h.Get(PrefillerHeader)); t != "" {
		return t
	}
	return firstListed(h.Get(PrefillerHeaderLLMD))
}

// firstListed is the first element of the comma-separated list v, without
// surrounding spaces.
func firstListed(v string) string {
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

// RequestIDHeader is the request ID vLLM adopts as its own; both halves of a
// split request carry the same one.
const RequestIDHeader = "X-Request-Id"

// hopHeaders are not forwarded (RFC 9110 §7.6.1), nor the ones the
// exchange sets itself, nor Expect: the prefill request sends its body at
// once, and a 100-continue was the client's exchange with the sidecar.
var hopHeaders = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Accept-Encoding": true, "Expect": true, http.CanonicalHeaderKey(PrefillerHeader): true, http.CanonicalHeaderKey(PrefillerHeaderLLMD): true,
}

// copyHeaders copies src's end-to-end headers into dst: not hopHeaders,
// and not the headers src's Connection header names, which are scoped to
// the client's connection as the hop-by-hop ones are.
func copyHeaders(dst, src http.Header) {
	var named map[string]bool
	for _, v := range src.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if tok = textproto.TrimString(tok); tok != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[http.CanonicalHeaderKey(tok)] = true
			}
		}
	}
	for k, vs := range src {
		if ck := http.CanonicalHeaderKey(k); hopHeaders[ck] || named[ck] {
			continue
		}
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}

// requestID returns the client's X-Request-Id when it is short and
// printable, else a fresh random one.
func requestID(hdr http.Header) string {
	if id := hdr.Get(RequestIDHeader); id != "" && len(id) <= 128 && printable(id) {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "pd-" + hex.EncodeToString(b[:])
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
