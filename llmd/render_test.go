package llmd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/llmd"
	"github.com/kvroute/kvroute/render"
)

// routing closes a plugins list with the guide's routing plugins, so that
// the list's only findings are its token producer's (and crowding).
const routing = ", {type: precise-prefix-cache-producer}, {type: prefix-cache-affinity-filter}, {type: token-load-scorer}]"

// The precise prefix-cache guide renders on the pool's own Ready endpoints
// (vllm.endpointDiscovery, each attempt capped by its attemptTimeout) and
// picks the Messages and Responses render paths with
// vllm.messagesRenderMode and vllm.responsesRenderMode: each is kvroute's
// render setting of that name, and discovery without a url is what kvroute
// does without render.url, so none is a finding.
func TestPickerConfigTokenProducerGuideRenderKeys(t *testing.T) {
	cfg, findings := loadBoth(t, epc(`[{type: token-producer, parameters: {modelName: Qwen/Qwen3-32B,
		vllm: {endpointDiscovery: {attemptTimeout: 2500ms, loadBalancer: {type: round-robin}},
		  messagesRenderMode: native, responsesRenderMode: legacy, prefillOnly: true, omitMMKwargs: false, timeout: 4s}}}`+routing, ""))
	requireFindings(t, findings, crowding)
	require.Empty(t, cfg.Render.URL, "rendered on the routed endpoints")
	require.Equal(t, 2500*time.Millisecond, *cfg.Render.AttemptTimeout)
	require.Equal(t, render.ModeNative, cfg.Render.MessagesRenderMode)
	require.Equal(t, render.ModeLegacy, cfg.Render.ResponsesRenderMode)
	require.True(t, cfg.Render.PrefillOnly)
	require.False(t, *cfg.Render.OmitMMKwargs)
	require.Equal(t, 4*time.Second, cfg.Render.Timeout)

	// An empty endpointDiscovery (or attemptTimeout "") keeps kvroute's
	// per-attempt cap, where llm-d caps no attempt: a finding; auto modes
	// are the default.
	noCap := want{"plugins[token-producer].parameters.vllm.endpointDiscovery.attemptTimeout", llmd.Different}
	cfg, findings = loadBoth(t, epc(`[{type: token-producer, parameters: {modelName: m,
		vllm: {endpointDiscovery: {attemptTimeout: ""}, messagesRenderMode: auto, responsesRenderMode: ""}}}`+routing, ""))
	requireFindings(t, findings, noCap, crowding)
	require.Equal(t, kvroute.DefaultConfig().Render, cfg.Render)
	_, findings = loadBoth(t, epc(`[{type: token-producer, parameters: {modelName: m, vllm: {endpointDiscovery: {}}}}`+routing, ""))
	requireFindings(t, findings, noCap, crowding)
	// A kvroute configuration's own render.attemptTimeout settles it.
	cfg, findings, err := llmd.Load(strings.NewReader(`{"render":{"attemptTimeout":"0s"},"token-producer":{"vllm":{"endpointDiscovery":{}}}}`), llmd.Options{Strict: true})
	require.NoError(t, err)
	require.Empty(t, findings)
	require.Zero(t, *cfg.Render.AttemptTimeout)

	// In a kvroute configuration too.
	cfg, err = llmd.Translate(strings.NewReader(`{"token-producer":{"vllm":{"endpointDiscovery":{"attemptTimeout":"1s"},"messagesRenderMode":"native"}}}`))
	require.NoError(t, err)
	require.Equal(t, time.Second, *cfg.Render.AttemptTimeout)
	require.Equal(t, render.ModeNative, cfg.Render.MessagesRenderMode)
	_, err = llmd.Translate(strings.NewReader(`{"render":{"url":"http://r:8000"},"token-producer":{"vllm":{"endpointDiscovery":{}}}}`))
	require.ErrorContains(t, err, "token-producer.vllm.endpointDiscovery and render.url")
}

// The token producer's settings kvroute's render client has no use for are
// findings, and what llm-d's token producer refuses kvroute refuses too.
func TestPickerConfigTokenProducerRenderKeysKvrouteLacks(t *testing.T) {
	p := "plugins[token-producer].parameters.vllm."
	_, findings := loadBoth(t, epc(`[{type: token-producer, parameters: {modelName: m,
		vllm: {url: "https://render:8443", caCertPath: /ca.pem, clientCertPath: /c.pem, clientKeyPath: /k.pem, insecureSkipVerify: true}}}`+routing, ""))
	requireFindings(t, findings, want{p + "caCertPath", llmd.NoEquivalent},
		want{p + "clientCertPath", llmd.NoEquivalent}, want{p + "clientKeyPath", llmd.NoEquivalent},
		want{p + "insecureSkipVerify", llmd.NoEquivalent}, crowding)
	_, findings = loadBoth(t, epc(`[{type: token-producer, parameters: {modelName: m,
		vllm: {endpointDiscovery: {discoverModelLimits: true, minModelLen: 4096, contextLimitLabel: l,
		  portRules: [{selector: {matchLabels: {a: b}}, basePort: 8200}]}}}}`+routing, ""))
	requireFindings(t, findings, want{p + "endpointDiscovery.discoverModelLimits", llmd.NoEquivalent},
		want{p + "endpointDiscovery.minModelLen", llmd.NoEquivalent},
		want{p + "endpointDiscovery.contextLimitLabel", llmd.NoEquivalent},
		want{p + "endpointDiscovery.portRules", llmd.NoEquivalent}, want{p + "endpointDiscovery.attemptTimeout", llmd.Different}, crowding)

	for params, msg := range map[string]string{
		`{modelName: m, vllm: {url: "http://r:8000", endpointDiscovery: {}}}`:       p + "url and " + p + "endpointDiscovery: only one of them",
		`{modelName: m, vllm: {endpointDiscovery: {attemptTimeout: 0s}}}`:           p + "endpointDiscovery.attemptTimeout 0s is not a positive duration",
		`{modelName: m, vllm: {endpointDiscovery: {attemptTimeout: -1s}}}`:          p + "endpointDiscovery.attemptTimeout -1s is not a positive duration",
		`{modelName: m, vllm: {endpointDiscovery: {loadBalancer: {type: random}}}}`: p + `endpointDiscovery.loadBalancer.type "random": llm-d's token producer has the round-robin load balancer only`,
		`{modelName: m, vllm: {messagesRenderMode: fast}}`:                          "messagesRenderMode must be",
		`{modelName: m, vllm: {endpointDiscovery: {attemptTimeut: 1s}}}`:            p + "endpointDiscovery.attemptTimeut: unknown key",
	} {
		_, _, err := llmd.Load(strings.NewReader(epc("[{type: token-producer, parameters: "+params+"}]", "")), llmd.Options{})
		require.ErrorIs(t, err, kvroute.ErrInvalidConfig, params)
		require.ErrorContains(t, err, msg, params)
	}
}
