package main

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// --session-config is read with package session's strict rules before the
// picker starts.
func TestSessionConfigIsCheckedBeforeStarting(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	for content, want := range map[string]string{
		"ttll: 1m\n":           "ttll",
		"ttl: 60\n":            "ttl",
		"cookieMaxAge: -1s\n":  "cookieMaxAge",
		"headers: [\"a b\"]\n": "headers[0]",
	} {
		err := tryRun("--session-config", writeConfig(t, dir, "session.yaml", content))
		require.ErrorContains(t, err, want, content)
	}
	err := tryRun("--session-config", filepath.Join(dir, "absent.yaml"))
	require.ErrorContains(t, err, "--session-config")
}

// kvroute-epp with --session-config behind an Envoy-behaving proxy and two
// simulated engines: a client that keeps cookies gets llm-d's session
// cookie on its first response and, sending it back, every later request
// goes to the same engine although no two share a block; a session header
// sticks too; the metrics count it.
func TestRunWithSessionAffinity(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the picker and the engines, which Cleanup stops first
	eps := startEngines(t, 2)
	dir := t.TempDir()
	e := startBehindEnvoy(t, "--endpoints", strings.Join(eps, ","), "--config", writeConfig(t, dir, "config.yaml", noRenderConfig),
		"--session-config", writeConfig(t, dir, "session.yaml", "ttl: 5m\n"))

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Transport: e.client.Transport, Jar: jar}
	post := func(c *http.Client, h map[string]string, k int) *http.Response {
		resp, body := postCompletion(t, c, e.envoy, fmt.Sprintf(`{"model":"%s","prompt":"question %d of the session","max_tokens":2}`, model, k), h)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		return resp
	}
	resp := post(client, nil, 0)
	home := resp.Header.Get(extproc.EndpointHeader)
	require.Len(t, resp.Cookies(), 1)
	require.Equal(t, base64.StdEncoding.EncodeToString([]byte(home)), resp.Cookies()[0].Value)
	for k := 1; k < 8; k++ {
		resp := post(client, nil, k)
		require.Equal(t, home, resp.Header.Get(extproc.EndpointHeader), "request %d", k)
		require.Empty(t, resp.Cookies(), "request %d", k)
	}
	plain := e.client
	first := post(plain, map[string]string{"X-Session-Id": "agent-1"}, 100).Header.Get(extproc.EndpointHeader)
	for k := 101; k < 105; k++ {
		require.Equal(t, first, post(plain, map[string]string{"X-Session-Id": "agent-1"}, k).Header.Get(extproc.EndpointHeader))
	}

	b := e.metrics()
	require.Contains(t, b, "kvroute_session_cookies_set_total 1")
	require.Contains(t, b, `kvroute_session_keys_total{source="cookie"} 7`)
	require.Contains(t, b, `kvroute_session_keys_total{source="header"} 5`)

	e.stop()
}
