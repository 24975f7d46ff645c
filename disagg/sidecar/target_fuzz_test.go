package sidecar

import (
	"net"
	"net/http"
	"strconv"
	"testing"
)

// FuzzPrefillerTarget feeds arbitrary x-prefiller-host-port and
// X-Request-Id values (both come from the client; seed corpus in
// testdata/fuzz/FuzzPrefillerTarget) to the checks the exchange makes of
// them: it never panics; a target ValidTarget accepts, when the prefill
// request can be built from it at all, is exactly the request's host, with
// a port in 1..65535, no user info, query or fragment and the client's path
// intact, so that an allow-list of host:port values cannot be talked
// around; and the request ID sent on is the client's when short and
// printable, a fresh printable one otherwise.
func FuzzPrefillerTarget(f *testing.F) {
	for _, s := range []string{"127.0.0.1:8000", "prefill-0.svc:80", "[::1]:9000", "[fe80::1%25eth0]:80", "a\\b:80",
		"h:80/x", "u@h:80", "h:080", "h:+80", "[h]:80", "h\x00:80", "h\t:80"} {
		f.Add(s, "abc-1")
	}
	f.Add("h:80", "a b")
	f.Add("h:80", "\x7fid")
	f.Fuzz(func(t *testing.T, target, id string) {
		if ValidTarget(target) {
			for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
				req, err := http.NewRequest(http.MethodPost, DefaultPrefillerScheme+"://"+target+path, nil)
				if err != nil {
					continue // counted as a bad target by the exchange
				}
				u := req.URL
				if u.Host != target || u.User != nil || u.Path != path || u.RawQuery != "" || u.Fragment != "" {
					t.Fatalf("target %q gave URL host %q, user %v, path %q, query %q, fragment %q",
						target, u.Host, u.User, u.Path, u.RawQuery, u.Fragment)
				}
				if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
					t.Fatalf("target %q gave port %q", target, u.Port())
				}
				if _, _, err := net.SplitHostPort(u.Host); err != nil {
					t.Fatalf("target %q: %v", target, err)
				}
			}
		}
		got := requestID(http.Header{RequestIDHeader: {id}})
		if len(got) == 0 || len(got) > 128 || !printable(got) {
			t.Fatalf("request ID %q from %q", got, id)
		}
		if len(id) > 0 && len(id) <= 128 && printable(id) && got != id {
			t.Fatalf("a usable request ID %q replaced by %q", id, got)
		}
	})
}
