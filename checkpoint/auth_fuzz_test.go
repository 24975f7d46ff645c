package checkpoint

import (
	"bufio"
	"bytes"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// FuzzSnapshotProof drives the snapshot handler's check of a peer's
// Authorization, the one header it reads from an unauthenticated peer.
// Any header value is answered without a panic, and only a bearer token
// equal to the replica's is taken as the legacy form. A proof built the way
// a bootstrapping replica builds it, for any URL a peer list accepts and a
// Go client can send a GET to, survives the trip through net/http's
// request writer and reader: the receiving replica accepts it whether it
// advertises that URL or names none (then it checks the URL the request
// names, from its Host header), refuses it under another token, and calls
// it a clock skew once dated beyond the skew. The seed corpus is in
// testdata/fuzz/FuzzSnapshotProof: an empty port and an IPv6 zone, which
// Go's client leaves out of the Host header, made that check refuse the
// proof.
func FuzzSnapshotProof(f *testing.F) {
	f.Add("tok", "http://10.0.0.1:9091/kvroute/snapshot", int64(1_800_000_000), "KVRoute-HMAC t=1, mac=00")
	f.Add("s3cret", "http://Replica-A.example:8080/snap?x=1#frag", int64(0), "Bearer s3cret")
	f.Add("t", "http://h", int64(-5), "kvroute-hmac mac=zz, t=9")
	f.Fuzz(func(t *testing.T, token, rawURL string, at int64, header string) {
		if token == "" {
			return // a replica without a token checks nothing
		}
		const skew = 30 * time.Second
		now := time.Unix(1_800_000_000, 0)
		req := &http.Request{Method: http.MethodGet, RequestURI: "/snap", Host: "h", URL: &url.URL{Path: "/snap"},
			Header: http.Header{"Authorization": {header}}}
		got := checkAuth(req, token, "", now, skew)
		if bt, ok := bearerToken(header); ok && bt == token {
			if got != authLegacy {
				t.Fatalf("the replica's own bearer token: %v", got)
			}
		} else if got == authLegacy {
			t.Fatalf("%q taken as the legacy bearer token", header)
		}

		at %= 1 << 40 // dates time.Time and the skew arithmetic carry without overflow
		sent, ok := sentRequest(rawURL, snapshotAuthorization(token, rawURL, time.Unix(at, 0)))
		if !ok {
			return
		}
		signedAt := time.Unix(at, 0)
		for _, self := range []string{rawURL, ""} {
			if got := checkAuth(sent, token, self, signedAt, skew); got != authOK {
				t.Fatalf("proof for %q (self %q, Host %q, target %q): %v", rawURL, self, sent.Host, sent.RequestURI, got)
			}
			if got := checkAuth(sent, token+"x", self, signedAt, skew); got != authRefused {
				t.Fatalf("proof for %q under another token: %v", rawURL, got)
			}
			if got := checkAuth(sent, token, self, signedAt.Add(skew+time.Second), skew); got != authClockOff {
				t.Fatalf("proof for %q dated beyond the skew: %v", rawURL, got)
			}
		}
	})
}

// sentRequest is the request a replica serving rawURL reads when a peer
// GETs it with the Authorization auth: built as the bootstrap builds it,
// written by net/http and read back by net/http's server-side reader. It
// reports false for a URL the bootstrap's config refuses as a peer (see
// BootstrapConfig.Validate) or net/http will not send to its host.
func sentRequest(rawURL, auth string) (*http.Request, bool) {
	if (BootstrapConfig{Peers: []string{rawURL}}).Validate() != nil {
		return nil, false
	}
	out, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil || out.URL.Scheme != "http" {
		return nil, false
	}
	out.Header.Set("Authorization", auth)
	var wire bytes.Buffer
	if err := out.Write(&wire); err != nil {
		return nil, false
	}
	in, err := http.ReadRequest(bufio.NewReader(&wire))
	// A host no Host header can carry (a quote, say) is sent as an empty
	// Host by net/http, and no such name resolves: no peer is reached there.
	return in, err == nil && in.Host != ""
}
