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
