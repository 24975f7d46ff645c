package session_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
)

// The cookie's value is llm-d's: the standard base64 (padded) of the
// endpoint's name; the Set-Cookie line carries llm-d's attributes.
func TestCookieValueIsLLMDFormat(t *testing.T) {
	for _, id := range []string{"a", "ab", "abc", "10.0.0.1:8000", "10.0.0.12:8000", "default/vllm-0"} {
		require.Equal(t, base64.StdEncoding.EncodeToString([]byte(id)), session.CookieValue(id))
	}
	a, err := session.New(session.Config{}, session.Options{})
	require.NoError(t, err)
	line, ok := a.ResponseCookie(&kvroute.Request{Header: http.Header{}}, "10.0.0.1:8000")
	require.True(t, ok)
	require.Equal(t, "llm-d-session="+session.CookieValue("10.0.0.1:8000")+"; Path=/; HttpOnly; SameSite=Lax", line)

	a, err = session.New(session.Config{CookieMaxAge: 3600e9}, session.Options{})
	require.NoError(t, err)
	line, _ = a.ResponseCookie(&kvroute.Request{}, "10.0.0.1:8000")
	require.Contains(t, line, "; Max-Age=3600")
}

// A client that keeps the cookie sticks with no header: the first
// response sets it, the next turns carry it and prefer its endpoint with no
// store entry (a pointer), the cookie is set again only when the session
// moves, and a request with a header key gets none.
func TestCookieSticksAndFollowsMoves(t *testing.T) {
	f := newFixture(t, session.Config{SaturationTokens: 10_000}, 4)
	req := &kvroute.Request{Header: http.Header{}}
	d := pickReq(t, f, req, prompt(1, 512))
	line, ok := f.a.ResponseCookie(req, d.Endpoint.ID)
	require.True(t, ok, "no key: the response sets the cookie")
	d.Done(kvroute.DoneInfo{})
	home := d.Endpoint.ID
	cookie := strings.SplitN(strings.SplitN(line, ";", 2)[0], "=", 2)[1]
	require.Equal(t, session.CookieValue(home), cookie)

	for turn := 2; turn < 10; turn++ {
		req := &kvroute.Request{Header: http.Header{"Cookie": {"other=1; llm-d-session=" + cookie}}}
		d := pickReq(t, f, req, prompt(turn, 512))
		require.Equal(t, home, d.Endpoint.ID, "turn %d", turn)
		_, set := f.a.ResponseCookie(req, d.Endpoint.ID)
		require.False(t, set, "the cookie already names the endpoint")
		d.Done(kvroute.DoneInfo{})
	}
	require.Equal(t, 0, f.a.Len(), "a cookie that names an endpoint is a pointer: nothing stored")

	// Saturated: the session moves and the cookie follows it.
	busy := f.r.Load().Dispatch(home, 9_900)
	req = &kvroute.Request{Header: http.Header{"Cookie": {"llm-d-session=" + cookie}}}
	d = pickReq(t, f, req, prompt(20, 512))
	require.NotEqual(t, home, d.Endpoint.ID)
	line, ok = f.a.ResponseCookie(req, d.Endpoint.ID)
	require.True(t, ok)
	require.Contains(t, line, "llm-d-session="+session.CookieValue(d.Endpoint.ID)+";")
	d.Done(kvroute.DoneInfo{})
	busy.Done()

	// A header key: no cookie.
	req = &kvroute.Request{Header: header("X-Session-Id", "conv")}
	d = pickReq(t, f, req, prompt(30, 512))
	_, set := f.a.ResponseCookie(req, d.Endpoint.ID)
	require.False(t, set)
	d.Done(kvroute.DoneInfo{})

	require.Equal(t, 2.0, f.counter(t, "kvroute_session_cookies_set_total", "", ""))
	require.Equal(t, 9.0, f.counter(t, "kvroute_session_keys_total", "source", "cookie"))
	require.Equal(t, 8.0, f.counter(t, "kvroute_session_lookups_total", "outcome", "hit"))
	require.Equal(t, 1.0, f.counter(t, "kvroute_session_lookups_total", "outcome", "moved"))
}

// An opaque cookie (llm-d's names a pod, namespace/name) is a session key
// like a header's, and the response rewrites it to name kvroute's
// endpoint; setCookie false sets none.
func TestOpaqueCookieAndSetCookieOff(t *testing.T) {
	f := newFixture(t, session.Config{}, 4)
	llmd := base64.StdEncoding.EncodeToString([]byte("default/vllm-0"))
	req := &kvroute.Request{Header: http.Header{"Cookie": {"llm-d-session=" + llmd}}}
	d := pickReq(t, f, req, prompt(1, 512))
	require.Equal(t, llmd, req.Session)
	require.Equal(t, 1, f.a.Len(), "an opaque cookie is stored like a header key")
	line, ok := f.a.ResponseCookie(req, d.Endpoint.ID)
	require.True(t, ok)
	require.Contains(t, line, session.CookieValue(d.Endpoint.ID))
	d.Done(kvroute.DoneInfo{})

	off := false
	a, err := session.New(session.Config{SetCookie: &off}, session.Options{})
	require.NoError(t, err)
	_, ok = a.ResponseCookie(&kvroute.Request{}, "10.0.0.1:8000")
	require.False(t, ok)
	a, err = session.New(session.Config{Cookie: "-"}, session.Options{})
	require.NoError(t, err)
	_, ok = a.ResponseCookie(&kvroute.Request{}, "10.0.0.1:8000")
	require.False(t, ok, "no cookie read, none set")
	// Asking for cookies with no cookie to set is a contradiction, refused
	// rather than answered with no cookie.
	on := true
	_, err = session.New(session.Config{Cookie: "-", SetCookie: &on}, session.Options{})
	require.ErrorIs(t, err, session.ErrInvalidConfig)
	require.ErrorContains(t, err, "setCookie")
	_, err = session.New(session.Config{CookieMaxAge: -1}, session.Options{})
	require.ErrorIs(t, err, session.ErrInvalidConfig)
	// Max-Age is whole seconds: a fraction would be cut off, and a value
	// under a second would set a cookie without Max-Age, one that lives as
	// long as the browser instead of expiring at once.
	for _, d := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond} {
		_, err = session.New(session.Config{CookieMaxAge: d}, session.Options{})
		require.ErrorIs(t, err, session.ErrInvalidConfig, d)
		require.ErrorContains(t, err, "cookieMaxAge", d)
	}
}

// With Derive, a request whose conversation's opening gives it a key gets
// no cookie: the derived key keeps each conversation on its own endpoint,
// where a cookie, one per client and read before derivation, would key
// every conversation of the client alike from the next turn on. A request
// with nothing to derive from (no user message) still gets the cookie.
func TestDerivedKeyGetsNoCookie(t *testing.T) {
	f := newFixture(t, session.Config{Derive: true, SaturationTokens: 10_000}, 4)
	chat := func(conv string) []byte {
		return []byte(`{"model":"` + testModel + `","messages":[{"role":"user","content":"` + conv + `"}]}`)
	}
	req := &kvroute.Request{Header: http.Header{}, Body: chat("conv-a")}
	d := pickReq(t, f, req, prompt(1, 512))
	require.True(t, strings.HasPrefix(req.Session, "d:"), req.Session)
	_, set := f.a.ResponseCookie(req, d.Endpoint.ID)
	require.False(t, set, "a derived key gets no cookie")
	d.Done(kvroute.DoneInfo{})
	home := d.Endpoint.ID

	req = &kvroute.Request{Header: http.Header{}, Body: chat("conv-a")}
	d = pickReq(t, f, req, prompt(2, 512))
	require.Equal(t, home, d.Endpoint.ID, "the derived key sticks without a cookie")
	d.Done(kvroute.DoneInfo{})

	req = &kvroute.Request{Header: http.Header{}, Body: []byte(`{"model":"` + testModel + `","prompt":"hi"}`)}
	d = pickReq(t, f, req, prompt(3, 512))
	require.Empty(t, req.Session, "a completions prompt has no opening")
	_, set = f.a.ResponseCookie(req, d.Endpoint.ID)
	require.True(t, set, "no key at all: the cookie")
	d.Done(kvroute.DoneInfo{})

	require.Equal(t, 1.0, f.counter(t, "kvroute_session_cookies_set_total", "", ""))
	require.Equal(t, 2.0, f.counter(t, "kvroute_session_keys_total", "source", "derived"))
	require.Equal(t, 1.0, f.counter(t, "kvroute_session_keys_total", "source", "none"))
}

// Served records a fallback's endpoint for a header key, and nothing for a
// cookie key (its response cookie names the endpoint).
func TestServedRecordsTheFallback(t *testing.T) {
	a, err := session.New(session.Config{}, session.Options{})
	require.NoError(t, err)
	req := &kvroute.Request{Header: header("X-Session-Id", "c"), Session: "c"}
	a.Served(req, "10.0.0.2:8000")
	ep, ok := a.Endpoint("c")
	require.True(t, ok)
	require.Equal(t, "10.0.0.2:8000", ep)
	v := session.CookieValue("10.0.0.1:8000")
	a.Served(&kvroute.Request{Header: http.Header{"Cookie": {"llm-d-session=" + v}}, Session: v}, "10.0.0.2:8000")
	require.Equal(t, 1, a.Len())
}

func pickReq(t *testing.T, f *fixture, req *kvroute.Request, tokens []uint32) *kvroute.Decision {
	t.Helper()
	req.Prompts = promptsOf(tokens)
	d, err := f.r.Pick(t.Context(), req, f.eps)
	require.NoError(t, err)
	return d
}

func promptsOf(tokens []uint32) []render.Prompt { return []render.Prompt{{TokenIDs: tokens}} }
