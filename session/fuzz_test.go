package session_test

import (
	"net/http"
	"testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/session"
)

// FuzzKey feeds arbitrary header, cookie and body bytes to the key
// extraction: it must never panic, and a key it returns from a header or
// cookie is well formed.
func FuzzKey(f *testing.F) {
	f.Add("conv-1", "llm-d-session=abc", []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	f.Add("bad key", `a="b"; llm-d-session="x y"`, []byte(`{"input":[{"role":"user"}]}`))
	f.Add("", ";;;=", []byte(`{"messages":[1,2]}`))
	a, err := session.New(session.Config{Derive: true}, session.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, hv, cookie string, body []byte) {
		req := &kvroute.Request{Header: http.Header{"X-Session-Id": {hv}, "Cookie": {cookie}}, Body: body}
		k, err := a.Key(req)
		if err != nil {
			t.Fatal(err) // not strict: never an error
		}
		if len(k) > 256 {
			t.Fatalf("key of %d bytes", len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x21 || k[i] > 0x7e {
				t.Fatalf("key %q holds byte %#x", k, k[i])
			}
		}
	})
}

// FuzzCookiePointer checks that a cookie value points at an endpoint
// exactly when it is that endpoint's CookieValue (llm-d's base64 of its
// name), and that the opening of any body cuts cleanly (no panic).
func FuzzCookiePointer(f *testing.F) {
	f.Add("10.0.0.1:8000", "MTAuMC4wLjE6ODAwMA==")
	f.Add("a", "YQ==")
	f.Add("ab", "YWI")
	f.Add("", "")
	a, err := session.New(session.Config{}, session.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, value string) {
		req := &kvroute.Request{Header: http.Header{"Cookie": {"llm-d-session=" + value}}}
		key, err := a.Key(req)
		if err != nil {
			t.Fatal(err)
		}
		req.Session = key
		_, set := a.ResponseCookie(req, id)
		points := key != "" && id != "" && key == session.CookieValue(id)
		if id != "" && set == points {
			t.Fatalf("id %q, cookie %q (key %q): cookie set %v, but points %v", id, value, key, set, points)
		}
	})
}
