package gateway

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/session"
)

// startSessionFleet is a gateway with session affinity in front of n
// simulated engines that render the requests; KV events and speculative
// entries are off, so nothing but the session tells the router where a
// conversation's turns went (as before an engine's first events arrive).
func startSessionFleet(t *testing.T, n int, sc session.Config) *tokenFleet {
	t.Helper()
	f := &tokenFleet{client: &http.Client{Transport: &http.Transport{}}}
	eps := f.startEngines(t, n)
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.BlockSize = 16
	cfg.Events.Enabled = new(false)
	cfg.Speculative.Enabled = new(false)
	var err error
	f.gw, err = NewServer(t.Context(), ServerConfig{Listen: "127.0.0.1:0", Router: cfg, Endpoints: eps, Session: &sc}, Options{})
	require.NoError(t, err)
	return f
}

// chatTurn posts turn k of a conversation (its messages so far) and
// returns the endpoint that served it.
func chatTurn(t *testing.T, f *tokenFleet, hdr http.Header, conv string, k int) (string, int) {
	t.Helper()
	var msgs []string
	msgs = append(msgs, `{"role":"system","content":"You are a coding agent. Use the tools."}`)
	for i := 0; i <= k; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"%s step %d: run the tests and read the output of tool call %d"}`, conv, i, i))
		if i < k {
			msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"calling tool %d for %s"}`, i, conv))
		}
	}
	body := `{"model":"` + testModel + `","max_tokens":2,"messages":[` + strings.Join(msgs, ",") + `]}`
	req, err := http.NewRequest(http.MethodPost, f.gw.URL()+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header = hdr.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	require.NoError(t, err)
	out := readAll(t, resp)
	return resp.Header.Get(HeaderEndpoint), resp.StatusCode + 0*len(out)
}

// Through the gateway, with simulated engines and no cache signal: each
// conversation's turns stick to one endpoint when they carry a session
// header (or, with derive, none at all), spread without one, and leave an
// endpoint that is saturated.
func TestGatewaySessionAffinity(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startSessionFleet(t, 4, session.Config{Derive: true, SaturationTokens: 20_000})
	defer f.close(t)

	for c := range 4 {
		conv := fmt.Sprintf("conv-%d", c)
		hdr := http.Header{"X-Session-Id": {conv}}
		home, code := chatTurn(t, f, hdr, conv, 0)
		require.Equal(t, http.StatusOK, code)
		for k := 1; k < 8; k++ {
			ep, code := chatTurn(t, f, hdr, conv, k)
			require.Equal(t, http.StatusOK, code)
			require.Equal(t, home, ep, "%s turn %d", conv, k)
		}
	}
	// No header: the key derived from the conversation's opening sticks too.
	home, _ := chatTurn(t, f, http.Header{}, "derived", 0)
	for k := 1; k < 6; k++ {
		ep, _ := chatTurn(t, f, http.Header{}, "derived", k)
		require.Equal(t, home, ep, "derived turn %d", k)
	}

	// A saturated endpoint is left: other clients' prompts in flight there.
	hdr := http.Header{"X-Session-Id": {"busy"}}
	home, _ = chatTurn(t, f, hdr, "busy", 0)
	other := f.gw.Router().Load().Dispatch(home, 19_990)
	ep, _ := chatTurn(t, f, hdr, "busy", 1)
	require.NotEqual(t, home, ep, "the saturated endpoint keeps no session")
	other.Done()
	ep2, _ := chatTurn(t, f, hdr, "busy", 2)
	require.Equal(t, ep, ep2, "the session stays where it moved")

	// A malformed header: routed without a session, counted.
	_, code := chatTurn(t, f, http.Header{"X-Session-Id": {strings.Repeat("x", 1000)}}, "long", 0)
	require.Equal(t, http.StatusOK, code)
	body := metricsText(t, f)
	t.Log(regexp.MustCompile(`(?m)^kvroute_session.*$`).FindAllString(body, -1))
	require.Contains(t, body, `kvroute_session_keys_total{source="invalid"} 1`)
	require.Contains(t, body, `kvroute_session_lookups_total{outcome="moved"} 1`)
	require.Regexp(t, `kvroute_session_lookups_total\{outcome="hit"\} (3[3-9]|[4-9]\d)`, body)
}

// With Strict, a malformed session header is answered 400.
func TestGatewaySessionStrictRefusesMalformedKey(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startSessionFleet(t, 2, session.Config{Strict: true})
	defer f.close(t)
	_, code := chatTurn(t, f, http.Header{"X-Session-Id": {"two words"}}, "c", 0)
	require.Equal(t, http.StatusBadRequest, code)
	_, code = chatTurn(t, f, http.Header{"X-Session-Id": {"fine"}}, "c", 0)
	require.Equal(t, http.StatusOK, code)
}

// A client that keeps cookies and sends no session header sticks: the
// gateway's first response sets llm-d's session cookie naming the endpoint
// (base64 of its ID), the client's cookie jar sends it back, its turns stay
// there although every turn opens differently (nothing to derive from), no
// response sets it again until the session moves, and a client that sends
// a header gets none. A malformed cookie is counted and ignored (a new
// cookie replaces it).
func TestGatewaySetsSessionCookie(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startSessionFleet(t, 4, session.Config{SaturationTokens: 20_000})
	defer f.close(t)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Transport: f.client.Transport, Jar: jar}
	post := func(c *http.Client, hdr http.Header, text string) *http.Response {
		t.Helper()
		body := `{"model":"` + testModel + `","max_tokens":2,"messages":[{"role":"user","content":"` + text + `"}]}`
		req, err := http.NewRequest(http.MethodPost, f.gw.URL()+"/v1/chat/completions", strings.NewReader(body))
		require.NoError(t, err)
		req.Header = hdr
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		require.NoError(t, err)
		out := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, out)
		return resp
	}
	resp := post(client, http.Header{}, "first question of a cookie client")
	home := resp.Header.Get(HeaderEndpoint)
	cs := resp.Cookies()
	require.Len(t, cs, 1)
	require.Equal(t, "llm-d-session", cs[0].Name)
	require.Equal(t, base64.StdEncoding.EncodeToString([]byte(home)), cs[0].Value)
	require.Equal(t, "/", cs[0].Path)
	require.True(t, cs[0].HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, cs[0].SameSite)
	for k := range 6 {
		resp := post(client, http.Header{}, fmt.Sprintf("unrelated question %d", k))
		require.Equal(t, home, resp.Header.Get(HeaderEndpoint), "turn %d", k)
		require.Empty(t, resp.Header.Values("Set-Cookie"), "turn %d: the cookie names the endpoint already", k)
	}
	// Saturated: the session moves and the response names the new endpoint.
	busy := f.gw.Router().Load().Dispatch(home, 19_990)
	resp = post(client, http.Header{}, "while busy")
	moved := resp.Header.Get(HeaderEndpoint)
	require.NotEqual(t, home, moved)
	require.Len(t, resp.Cookies(), 1)
	require.Equal(t, session.CookieValue(moved), resp.Cookies()[0].Value)
	busy.Done()
	resp = post(client, http.Header{}, "after the move")
	require.Equal(t, moved, resp.Header.Get(HeaderEndpoint), "the jar carries the new cookie")

	// A header key: no cookie set.
	resp = post(f.client, http.Header{"X-Session-Id": {"conv"}}, "header client")
	require.Empty(t, resp.Header.Values("Set-Cookie"))
	// A malformed cookie: counted, routed without it, replaced.
	resp = post(f.client, http.Header{"Cookie": {"llm-d-session=" + strings.Repeat("x", 300)}}, "bad cookie")
	require.Len(t, resp.Cookies(), 1)

	body := metricsText(t, f)
	require.Contains(t, body, `kvroute_session_cookies_set_total 3`)
	require.Contains(t, body, `kvroute_session_keys_total{source="cookie"} 8`)
	require.Contains(t, body, `kvroute_session_keys_total{source="invalid"} 1`)
	require.Contains(t, body, `kvroute_session_lookups_total{outcome="hit"} 7`)
	require.Contains(t, body, `kvroute_session_lookups_total{outcome="moved"} 1`)
}

// With Strict, a malformed session cookie is answered 400 too, in the
// API's error shape.
func TestGatewaySessionStrictRefusesMalformedCookie(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startSessionFleet(t, 2, session.Config{Strict: true})
	defer f.close(t)
	_, code := chatTurn(t, f, http.Header{"Cookie": {"llm-d-session=" + strings.Repeat("y", 300)}}, "c", 0)
	require.Equal(t, http.StatusBadRequest, code)
	body := metricsText(t, f)
	require.Contains(t, body, `kvroute_session_keys_total{source="invalid"} 1`)
}

func metricsText(t *testing.T, f *tokenFleet) string {
	t.Helper()
	resp, err := f.client.Get(f.gw.URL() + "/metrics")
	require.NoError(t, err)
	return readAll(t, resp)
}

var _ = context.Background
