package main

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// With --disagg-config and --session-config together the decode pick,
// which replaces the router's, weighs the session too: a request whose
// llm-d-session cookie names the second of two idle engines decodes there,
// where the decode pick's tie-break alone sends every request to the
// first. The decider's threshold keeps every prompt local.
func TestRunWithSessionAffinityUnderPD(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the picker and the engines, which Cleanup stops first
	eps := startEngines(t, 2)
	dir := t.TempDir()
	e := startBehindEnvoy(t, "--endpoints", strings.Join(eps, ","), "--config", writeConfig(t, dir, "config.yaml", noRenderConfig),
		"--session-config", writeConfig(t, dir, "session.yaml", "ttl: 5m\nsetCookie: false\n"),
		"--disagg-config", writeConfig(t, dir, "disagg.yaml", "nonCachedTokens: 1073741824\n"))
	post := func(cookie string, k int) string {
		var h map[string]string
		if cookie != "" {
			h = map[string]string{"Cookie": (&http.Cookie{Name: "llm-d-session", Value: cookie}).String()}
		}
		return routedTo(t, e.client, e.envoy, fmt.Sprintf(`{"model":"%s","prompt":"question %d","max_tokens":2}`, model, k), h)
	}
	require.Equal(t, eps[0], post("", 0), "idle engines alike: the first decode candidate")
	second := base64.StdEncoding.EncodeToString([]byte(eps[1]))
	for k := 1; k < 4; k++ {
		require.Equal(t, eps[1], post(second, k), "request %d", k)
	}

	e.stop()
}
