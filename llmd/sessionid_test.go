package llmd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/llmd"
	"github.com/kvroute/kvroute/session"
)

// A session_id source naming a session-id-producer's attribute reads that
// producer's header or cookie, as llm-d's producer documents them: the
// header joins session's headers in the sources' order, the cookie is
// session's cookie, and nothing is written back, as in session_id.
func TestPickerConfigSessionIDProducer(t *testing.T) {
	doc := epc(`
- type: prefix-cache-affinity-filter
- type: token-load-scorer
- name: by-header
  type: session-id-producer
  parameters:
    headerName: " X-User-Session "
- name: by-cookie
  type: session-id-producer
  parameters:
    cookieName: app-session
- type: session-affinity-scorer
  parameters:
    strategy: session_id
    sessionIdConfig:
      sources:
      - attribute: SessionIDDataKey
        producer: by-header
      - header: x-session-id
      - attribute: SessionIDDataKey
        producer: by-cookie`,
		"[{name: default, plugins: [{pluginRef: prefix-cache-affinity-filter}, {pluginRef: token-load-scorer}, {pluginRef: session-affinity-scorer, weight: 2}]}]")
	res := loadResult(t, doc)
	off := false
	require.Equal(t, &session.Config{Headers: []string{"X-User-Session", "x-session-id"}, Cookie: "app-session", SetCookie: &off, TTL: 5 * time.Minute, Weight: 2}, res.Session)
	paths := findingPaths(res.Findings)
	require.NotContains(t, strings.Join(paths, "\n"), "plugins[by-")

	// The cookie before a header source: kvroute reads it last.
	doc = strings.Replace(doc, "      - attribute: SessionIDDataKey\n        producer: by-header\n", "", 1)
	doc = strings.Replace(doc, "      - header: x-session-id\n", "", 1)
	doc = strings.Replace(doc, "producer: by-cookie", "producer: by-cookie\n      - header: x-session-id", 1)
	res = loadResult(t, doc)
	require.Equal(t, &session.Config{Headers: []string{"x-session-id"}, Cookie: "app-session", SetCookie: &off, TTL: 5 * time.Minute, Weight: 2}, res.Session)
	paths = findingPaths(res.Findings)
	require.Contains(t, paths, "plugins[session-affinity-scorer].parameters.sessionIdConfig.sources[0]: different")
	require.Contains(t, paths, "plugins[by-header]: different", "a producer no source reads")
	require.NotContains(t, paths, "plugins[by-cookie]: different")

	// A second cookie, an attribute no producer publishes, and a producer
	// under the encoded_endpoint_header strategy, which reads no source.
	res = loadResult(t, epc(`[{name: a, type: session-id-producer, parameters: {cookieName: a}}, {name: b, type: session-id-producer, parameters: {cookieName: b}},
		{type: session-affinity-scorer, parameters: {strategy: session_id, sessionIdConfig: {sources: [
		  {attribute: SessionIDDataKey, producer: a}, {attribute: SessionIDDataKey, producer: b}, {attribute: SessionIDDataKey}, {attribute: agent-identity, producer: a}]}}}]`, ""))
	require.Equal(t, &session.Config{Cookie: "a", SetCookie: &off, TTL: 5 * time.Minute}, res.Session)
	paths = findingPaths(res.Findings)
	const at = "plugins[session-affinity-scorer].parameters.sessionIdConfig.sources"
	for _, p := range []string{at + "[1]: none", at + "[2].attribute: none", at + "[3].attribute: none", at + ": none", "plugins[b]: different"} {
		require.Contains(t, paths, p)
	}
	res = loadResult(t, epc("[{type: session-id-producer, parameters: {headerName: x-user}}, {type: session-affinity-scorer}]", ""))
	require.Equal(t, &session.Config{Headers: []string{"x-session-token"}}, res.Session)
	require.Contains(t, findingPaths(res.Findings), "plugins[session-id-producer]: different")

	// What llm-d's loader refuses.
	for doc, msg := range map[string]string{
		epc("[{type: session-id-producer}]", ""):                                                                                                  "plugins[session-id-producer].parameters: exactly one of headerName and cookieName",
		epc("[{type: session-id-producer, parameters: {headerName: a, cookieName: b}}]", ""):                                                      "exactly one of headerName and cookieName",
		epc("[{type: session-id-producer, parameters: {header: a}}]", ""):                                                                         "plugins[session-id-producer].parameters.header: unknown key",
		epc("[{type: session-affinity-scorer, parameters: {strategy: session_id, sessionIdConfig: {sources: [{header: a, attribute: b}]}}}]", ""): "sources[0]: exactly one of header and attribute",
		epc("[{type: session-affinity-scorer, parameters: {strategy: session_id, sessionIdConfig: {sources: [{producer: a}]}}}]", ""):             "sources[0]: exactly one of header and attribute",
		epc("[{type: session-id-producer, parameters: {cookieName: 'a b'}}, {type: session-affinity-scorer, parameters: {strategy: session_id, sessionIdConfig: {sources: [{attribute: SessionIDDataKey, producer: session-id-producer}]}}}]", ""): "session: invalid config",
	} {
		_, err := llmd.LoadResult(strings.NewReader(doc), llmd.Options{})
		require.ErrorIs(t, err, kvroute.ErrInvalidConfig, doc)
		require.ErrorContains(t, err, msg)
	}
}
