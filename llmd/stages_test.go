package llmd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/llmd"
	"github.com/kvroute/kvroute/session"
)

// pdConfig is a P/D EndpointPickerConfig as llm-d's P/D guide writes it:
// role filters, one scheduling profile per role, and the profile handler
// naming its decider, which is listed after it.
const pdConfig = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: precise-prefix-cache-producer
  parameters:
    tokenProcessorConfig: {blockSizeTokens: 64}
- type: prefix-cache-affinity-filter
- type: token-load-scorer
- type: prefill-filter
- type: decode-filter
- type: max-score-picker
- type: disagg-profile-handler
  parameters:
    deciders:
      prefill: prefix-based-pd-decider
- type: prefix-based-pd-decider
  parameters:
    nonCachedTokens: 256
schedulingProfiles:
- name: prefill
  plugins:
  - pluginRef: prefill-filter
  - pluginRef: prefix-cache-affinity-filter
  - pluginRef: token-load-scorer
    weight: 2
  - pluginRef: max-score-picker
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: prefix-cache-affinity-filter
  - pluginRef: token-load-scorer
    weight: 2
  - pluginRef: max-score-picker
`

// loadResult loads doc with LoadResult in both modes, as loadBoth: strict
// fails exactly when there are findings, and otherwise reads the same.
func loadResult(t *testing.T, doc string) llmd.Result {
	t.Helper()
	res, err := llmd.LoadResult(strings.NewReader(doc), llmd.Options{})
	require.NoError(t, err)
	cfg, findings := loadBoth(t, doc)
	require.Equal(t, cfg, res.Config)
	requireDropped(t, findings, res)
	strict, err := llmd.LoadResult(strings.NewReader(doc), llmd.Options{Strict: true})
	if len(res.Findings) > 0 {
		require.ErrorIs(t, err, kvroute.ErrInvalidConfig)
		require.Nil(t, strict.Disagg)
		require.Nil(t, strict.Session)
		require.Nil(t, strict.Admission)
		require.Nil(t, strict.LoRA)
		return res
	}
	require.NoError(t, err)
	require.Equal(t, res, strict)
	return res
}

// requireDropped checks Load's findings against LoadResult's res: the same,
// then one for each stage res has, which Load's caller does not run.
func requireDropped(t *testing.T, findings []llmd.Finding, res llmd.Result) {
	t.Helper()
	n := 0
	for _, on := range []bool{res.Disagg != nil, res.Session != nil, res.Admission != nil, res.LoRA != nil} {
		if on {
			n++
		}
	}
	require.Len(t, findings, len(res.Findings)+n)
	require.Equal(t, res.Findings, findings[:len(res.Findings)])
	for _, f := range findings[len(res.Findings):] {
		require.Equal(t, llmd.Different, f.Kind, f.Path)
		require.Contains(t, f.Note, "llmd.LoadResult returns its configuration", f.Path)
	}
}

// A P/D EndpointPickerConfig turns kvroute's P/D profile on with the
// decider's threshold; the role filters and the second profile are what
// kvroute's profile does by itself.
func TestPickerConfigPD(t *testing.T) {
	res := loadResult(t, pdConfig)
	require.Equal(t, &disagg.Config{NonCachedTokens: 256}, res.Disagg)
	require.Equal(t, 64, res.Config.BlockSize)
	require.Equal(t, 2.0, res.Config.LoadWeight)
	requireFindings(t, res.Findings,
		want{"plugins[prefix-cache-affinity-filter]", llmd.Different},
		want{"plugins[prefill-filter]", llmd.NotNeeded},
		want{"plugins[decode-filter]", llmd.NotNeeded},
		want{"plugins[max-score-picker]", llmd.NotNeeded},
		want{"schedulingProfiles[decode]", llmd.Different},
	)
	require.Contains(t, res.Findings[1].Note, "llm-d.ai/role is decode or both")
	require.Contains(t, res.Findings[4].Note, "decodeCacheWeight")

	// always-disagg splits every request with a prompt: kvroute's negative
	// threshold.
	always := strings.Replace(pdConfig, "prefix-based-pd-decider\n  parameters:\n    nonCachedTokens: 256", "always-disagg-pd-decider", 1)
	always = strings.Replace(always, "prefill: prefix-based-pd-decider", "prefill: always-disagg-pd-decider", 1)
	require.Equal(t, &disagg.Config{NonCachedTokens: -1}, loadResult(t, always).Disagg)

	// The deprecated pd-profile-handler, with its flat parameters and its
	// default decider name.
	legacy := strings.Replace(pdConfig, "disagg-profile-handler\n  parameters:\n    deciders:\n      prefill: prefix-based-pd-decider",
		"pd-profile-handler\n  parameters:\n    decodeProfile: decode\n    prefillProfile: prefill\n    primaryPort: 8000", 1)
	res = loadResult(t, legacy)
	require.Equal(t, &disagg.Config{NonCachedTokens: 256}, res.Disagg)
	require.Equal(t, llmd.Finding{Path: "plugins[pd-profile-handler].parameters.primaryPort", Kind: llmd.NotNeeded,
		Note: "kvroute names the prefill endpoint in x-prefiller-host-port and routes to the decode endpoint's own port"}, res.Findings[4])
}

// Session affinity beside P/D takes the scorer's weight in the decode
// profile, and says how the session enters kvroute's decode pick.
func TestPickerConfigSessionBesidePD(t *testing.T) {
	doc := strings.Replace(pdConfig, "- type: max-score-picker\n", "- type: max-score-picker\n- {type: session-affinity-scorer, parameters: {strategy: session_id}}\n", 1)
	doc += "  - pluginRef: session-affinity-scorer\n    weight: 4\n"
	res := loadResult(t, doc)
	require.Equal(t, &disagg.Config{NonCachedTokens: 256}, res.Disagg)
	require.Equal(t, &session.Config{Headers: []string{"x-session-id"}, Cookie: "-", TTL: 5 * time.Minute, Weight: 4}, res.Session)
	var note string
	for _, f := range res.Findings {
		require.False(t, f.Path == "plugins[session-affinity-scorer]" && f.Kind == llmd.NoEquivalent, f.Note)
		if f.Path == "plugins[session-affinity-scorer]" && strings.Contains(f.Note, "P/D") {
			note = f.Note
		}
	}
	require.Contains(t, note, "enters the decode pick")
}

// What kvroute's P/D profile does not do stays a finding saying what
// differs, and turns nothing on it cannot carry over.
func TestPickerConfigPDFindings(t *testing.T) {
	// nonCachedTokens 0, llm-d's default, turns llm-d's decider off.
	off := strings.Replace(pdConfig, "nonCachedTokens: 256", "nonCachedTokens: 0", 1)
	res := loadResult(t, off)
	require.Nil(t, res.Disagg)
	f := res.Findings[len(res.Findings)-2]
	require.Equal(t, "plugins[prefix-based-pd-decider].parameters.nonCachedTokens", f.Path)
	require.Contains(t, f.Note, "turns llm-d's decider off")
	require.Contains(t, findingPaths(res.Findings), "plugins[decode-filter]: different")
	// llm-d's handler runs the decode profile alone, the prefill one never.
	require.Contains(t, findingPaths(res.Findings), "schedulingProfiles[prefill]: none")

	// A minimum prompt length and an encode stage.
	more := strings.Replace(pdConfig, "nonCachedTokens: 256", "nonCachedTokens: 256\n    promptTokens: 1024", 1)
	more = strings.Replace(more, "      prefill: prefix-based-pd-decider", "      prefill: prefix-based-pd-decider\n      encode: e", 1)
	more = strings.Replace(more, "- type: max-score-picker\n", "- type: max-score-picker\n- {name: e, type: always-disagg-multimodal-decider}\n", 1)
	res = loadResult(t, more)
	require.Equal(t, &disagg.Config{NonCachedTokens: 256}, res.Disagg)
	paths := findingPaths(res.Findings)
	for _, p := range []string{
		"plugins[disagg-profile-handler].parameters: none",
		"plugins[prefix-based-pd-decider].parameters.promptTokens: none",
		"plugins[e]: none",
	} {
		require.Contains(t, paths, p)
	}

	// A handler without a prefill decider runs decode alone; a decider no
	// handler names runs for nothing.
	res = loadResult(t, strings.Replace(pdConfig, "  parameters:\n    deciders:\n      prefill: prefix-based-pd-decider\n", "", 1))
	require.Nil(t, res.Disagg)
	paths = findingPaths(res.Findings)
	require.Contains(t, paths, "plugins[disagg-profile-handler]: unneeded")
	require.Contains(t, paths, "plugins[prefix-based-pd-decider]: unneeded")

	// Strict decoding of every P/D parameter, and references checked.
	for doc, msg := range map[string]string{
		strings.Replace(pdConfig, "nonCachedTokens: 256", "nonCachedTokenz: 256", 1):       "plugins[prefix-based-pd-decider].parameters.nonCachedTokenz: unknown key",
		strings.Replace(pdConfig, "    deciders:\n", "    decider: x\n    deciders:\n", 1): "plugins[disagg-profile-handler].parameters.decider: unknown key",
		strings.Replace(pdConfig, "prefill: prefix-based-pd-decider", "prefill: nope", 1):  `prefill decider "nope": no plugin of that name`,
		// llm-d's decider refuses negative thresholds; kvroute's negative
		// nonCachedTokens would split every request.
		strings.Replace(pdConfig, "nonCachedTokens: 256", "nonCachedTokens: -1", 1):                                            "plugins[prefix-based-pd-decider].parameters.nonCachedTokens: -1 is negative",
		strings.Replace(pdConfig, "nonCachedTokens: 256", "nonCachedTokens: 256\n    promptTokens: -1", 1):                     "plugins[prefix-based-pd-decider].parameters.promptTokens: -1 is negative",
		strings.Replace(pdConfig, "- type: prefill-filter\n", "- {type: prefill-filter, parameters: {label: x}}\n", 1):         "plugins[prefill-filter].parameters.label: unknown key",
		strings.Replace(pdConfig, "- type: max-score-picker\n", "- {type: pd-profile-handler}\n- type: max-score-picker\n", 1): "both profile handlers",
		strings.Replace(strings.Replace(pdConfig, "prefix-based-pd-decider\n  parameters:\n    nonCachedTokens: 256", "always-disagg-pd-decider\n  parameters: {nonCachedTokens: 1}", 1),
			"prefill: prefix-based-pd-decider", "prefill: always-disagg-pd-decider", 1): "plugins[always-disagg-pd-decider].parameters.nonCachedTokens: unknown key",
	} {
		_, err := llmd.LoadResult(strings.NewReader(doc), llmd.Options{})
		require.ErrorIs(t, err, kvroute.ErrInvalidConfig, doc)
		require.ErrorContains(t, err, msg)
	}
}

// llm-d's handler reads stageOrder in any case, with or without its
// hyphen (decode-first, DecodeFirst, decode_first, decode), refuses any
// other order and a prefill decider in prefill-first order, and in
// prefill-first order prefills every request on the prefill profile before
// it picks the decode endpoint.
func TestPickerConfigPDStageOrder(t *testing.T) {
	withOrder := func(doc, order string) string {
		return strings.Replace(doc, "    deciders:\n", "    stageOrder: "+order+"\n    deciders:\n", 1)
	}
	want := loadResult(t, pdConfig)
	for _, order := range []string{"decode-first", "DecodeFirst", "decode_first", "decodefirst", "Decode"} {
		require.Equal(t, want, loadResult(t, withOrder(pdConfig, order)), order)
	}

	for doc, msg := range map[string]string{
		withOrder(pdConfig, "last"):          `plugins[disagg-profile-handler].parameters.stageOrder: "last"`,
		withOrder(pdConfig, "prefill-first"): "plugins[disagg-profile-handler].parameters.stageOrder: prefill-first takes no prefill decider",
	} {
		_, err := llmd.LoadResult(strings.NewReader(doc), llmd.Options{})
		require.ErrorIs(t, err, kvroute.ErrInvalidConfig, doc)
		require.ErrorContains(t, err, msg)
	}

	// Prefill-first without a decider splits every request: kvroute's
	// always-disagg, picking the decode endpoint first.
	noDecider := strings.Replace(pdConfig, "    deciders:\n      prefill: prefix-based-pd-decider\n", "    stageOrder: prefill_first\n", 1)
	res := loadResult(t, noDecider)
	require.Equal(t, &disagg.Config{NonCachedTokens: -1}, res.Disagg)
	paths := findingPaths(res.Findings)
	require.Contains(t, paths, "plugins[disagg-profile-handler].parameters.stageOrder: different")
	require.NotContains(t, paths, "plugins[disagg-profile-handler]: unneeded")

	// Without a prefill profile, there is nothing to prefill on.
	res = loadResult(t, strings.Replace(noDecider, "- name: prefill\n", "- name: prefill-pool\n", 1))
	require.Nil(t, res.Disagg)
	require.Contains(t, findingPaths(res.Findings), "plugins[disagg-profile-handler]: unneeded")
}

// llm-d's disagg-profile-handler runs its prefill stage only when a
// scheduling profile has the prefill profile's name: with none, its
// decider never runs and every request is decoded where it is prefilled,
// so kvroute configures no P/D either.
func TestPickerConfigPDWithoutPrefillProfile(t *testing.T) {
	doc := strings.Replace(pdConfig, "- name: prefill\n", "- name: prefill-pool\n", 1)
	res := loadResult(t, doc)
	require.Nil(t, res.Disagg)
	paths := findingPaths(res.Findings)
	require.Contains(t, paths, "plugins[disagg-profile-handler]: unneeded")
	require.Contains(t, paths, "plugins[prefix-based-pd-decider]: unneeded")

	// Named by profiles.prefill, it is found.
	doc = strings.Replace(doc, "    deciders:\n", "    profiles: {prefill: prefill-pool}\n    deciders:\n", 1)
	require.Equal(t, &disagg.Config{NonCachedTokens: 256}, loadResult(t, doc).Disagg)
}

// llm-d's disagg-profile-handler runs its profiles by name, not by their
// order: under P/D kvroute's router scorers, which make the prefill pick,
// take the prefill profile's weights and the session scorer the decode
// profile's, whichever profile comes first (an encode profile, or decode
// before prefill); without P/D the handler runs the decode profile alone,
// whose weights the router's scorers take.
func TestPickerConfigPDProfileOrder(t *testing.T) {
	head, _, ok := strings.Cut(pdConfig, "schedulingProfiles:\n")
	require.True(t, ok)
	head = strings.Replace(head, "- type: max-score-picker\n", "- type: max-score-picker\n- {type: encode-filter}\n- {type: session-affinity-scorer, parameters: {strategy: session_id}}\n", 1)
	const (
		encode  = "- name: encode\n  plugins:\n  - pluginRef: encode-filter\n"
		prefill = "- name: prefill\n  plugins:\n  - pluginRef: prefill-filter\n  - pluginRef: prefix-cache-affinity-filter\n  - pluginRef: token-load-scorer\n    weight: 3\n"
		decode  = "- name: decode\n  plugins:\n  - pluginRef: decode-filter\n  - pluginRef: prefix-cache-affinity-filter\n  - pluginRef: token-load-scorer\n    weight: 5\n  - pluginRef: session-affinity-scorer\n    weight: 4\n"
	)
	for _, profiles := range []string{prefill + decode, decode + prefill, encode + prefill + decode, encode + decode + prefill} {
		res := loadResult(t, head+"schedulingProfiles:\n"+profiles)
		require.Equal(t, &disagg.Config{NonCachedTokens: 256}, res.Disagg, profiles)
		require.Equal(t, 3.0, res.Config.LoadWeight, profiles)
		require.Equal(t, 4.0, res.Session.Weight, profiles)
		paths := findingPaths(res.Findings)
		require.Contains(t, paths, "schedulingProfiles[decode]: different", profiles)
		for _, p := range paths {
			require.False(t, strings.HasPrefix(p, "schedulingProfiles[prefill]"), "%s: %s", profiles, p)
		}
	}

	// Without P/D (no prefill decider), the decode profile is the one
	// llm-d runs.
	noPD := strings.Replace(head, "    deciders:\n      prefill: prefix-based-pd-decider\n", "", 1)
	for _, profiles := range []string{encode + decode, encode + prefill + decode} {
		res := loadResult(t, noPD+"schedulingProfiles:\n"+profiles)
		require.Nil(t, res.Disagg, profiles)
		require.Equal(t, 5.0, res.Config.LoadWeight, profiles)
		require.Equal(t, 4.0, res.Session.Weight, profiles)
	}
}

// findingPaths returns each finding's path and kind ("none", "different",
// "unneeded").
func findingPaths(fs []llmd.Finding) []string {
	kinds := map[llmd.Kind]string{llmd.NoEquivalent: "none", llmd.Different: "different", llmd.NotNeeded: "unneeded"}
	var out []string
	for _, f := range fs {
		out = append(out, f.Path+": "+kinds[f.Kind])
	}
	return out
}

// session_id affinity, as llm-d's session affinity scorer documents it,
// becomes kvroute's session affinity with its headers and TTL and no
// cookie; the scorer's weight is the session weight.
func TestPickerConfigSessionID(t *testing.T) {
	doc := epc(`
- type: prefix-cache-affinity-filter
- type: token-load-scorer
- type: session-affinity-scorer
  parameters:
    strategy: session_id
    sessionIdConfig:
      sources:
      - header: x-session-id
      - attribute: agent-identity
      evictionTtlSeconds: 600
      evictionSweepSeconds: 10`,
		"[{name: default, plugins: [{pluginRef: prefix-cache-affinity-filter}, {pluginRef: token-load-scorer, weight: 1}, {pluginRef: session-affinity-scorer, weight: 3}]}]")
	res := loadResult(t, doc)
	require.Equal(t, &session.Config{Headers: []string{"x-session-id"}, Cookie: "-", TTL: 10 * time.Minute, Weight: 3}, res.Session)
	const at = "plugins[session-affinity-scorer]"
	requireFindings(t, res.Findings,
		crowding,
		want{at + ".parameters.sessionIdConfig.evictionSweepSeconds", llmd.NotNeeded},
		want{at + ".parameters.sessionIdConfig.sources[1].attribute", llmd.NoEquivalent},
		want{at, llmd.Different},
		want{"plugins", llmd.Different},
	)
	require.Contains(t, res.Findings[3].Note, "flat 1")

	// Defaults: llm-d's x-session-id header and 300 s; a filter pins, which
	// kvroute's scorer does not.
	res = loadResult(t, epc("[{type: session-affinity-filter, parameters: {strategy: session_id}}]", ""))
	require.Equal(t, &session.Config{Headers: []string{"x-session-id"}, Cookie: "-", TTL: 5 * time.Minute}, res.Session)
	require.Contains(t, findingPaths(res.Findings), "plugins[session-affinity-filter]: different")

	// A prefill instance pins the prefill pick, which kvroute does not; a
	// second instance is one store too many.
	res = loadResult(t, epc(`[{name: a, type: session-affinity-scorer}, {name: b, type: session-affinity-scorer, parameters: {profileName: prefill}},
		{name: c, type: session-affinity-filter}]`, ""))
	require.Equal(t, &session.Config{Headers: []string{"x-session-token"}}, res.Session)
	paths := findingPaths(res.Findings)
	require.Contains(t, paths, "plugins[a].parameters.strategy: different")
	require.Contains(t, paths, "plugins[b].parameters.profileName: none")
	require.Contains(t, paths, "plugins[c]: different")

	for doc, msg := range map[string]string{
		epc("[{type: session-affinity-scorer, parameters: {strategy: sticky}}]", ""):                                                `strategy "sticky" is neither`,
		epc("[{type: session-affinity-scorer, parameters: {sessionIdConfig: {ttl: 3}}}]", ""):                                       "sessionIdConfig.ttl: unknown key",
		epc("[{type: session-affinity-scorer, parameters: {strategy: session_id, sessionIdConfig: {evictionTtlSeconds: -1}}}]", ""): "evictionTtlSeconds -1",
		epc("[{type: session-affinity-scorer, parameters: {encodedEndpointHeaderConfig: {header: 'a b'}}}]", ""):                    "session: invalid config",
	} {
		_, err := llmd.LoadResult(strings.NewReader(doc), llmd.Options{})
		require.ErrorIs(t, err, kvroute.ErrInvalidConfig, doc)
		require.ErrorContains(t, err, msg)
	}
}

// A session affinity scorer or filter that no scheduling profile
// references scores and filters nothing in llm-d: kvroute configures no
// session affinity for it, as for a lora-affinity-scorer.
func TestPickerConfigSessionUnreferenced(t *testing.T) {
	for _, typ := range []string{"session-affinity-scorer", "session-affinity-filter"} {
		doc := epc("[{type: token-load-scorer}, {type: "+typ+", parameters: {strategy: session_id}}]",
			"[{name: default, plugins: [{pluginRef: token-load-scorer}]}]")
		res := loadResult(t, doc)
		require.Nil(t, res.Session, typ)
		require.Contains(t, findingPaths(res.Findings), "plugins["+typ+"]: unneeded", typ)

		// The next one a profile references is the one kvroute runs.
		doc = epc("[{type: token-load-scorer}, {type: "+typ+", parameters: {strategy: session_id}}, {name: used, type: "+typ+"}]",
			"[{name: default, plugins: [{pluginRef: token-load-scorer}, {pluginRef: used}]}]")
		res = loadResult(t, doc)
		require.Equal(t, []string{"x-session-token"}, res.Session.Headers, typ)
	}
}

// A session affinity scorer or filter that only a scheduling profile
// kvroute does not run references (kvroute runs the first profile without
// a P/D handler) pins nothing in the pick kvroute makes: kvroute
// configures no session affinity for it, as for a lora-affinity-scorer,
// rather than adding a session scorer of weight 1 to a profile that has
// none.
func TestPickerConfigSessionInAProfileKvrouteDoesNotRun(t *testing.T) {
	for _, typ := range []string{"session-affinity-scorer", "session-affinity-filter"} {
		doc := epc("[{type: token-load-scorer}, {type: "+typ+"}]",
			"[{name: default, plugins: [{pluginRef: token-load-scorer}]}, {name: other, plugins: [{pluginRef: "+typ+"}]}]")
		res := loadResult(t, doc)
		require.Nil(t, res.Session, typ)
		require.Contains(t, findingPaths(res.Findings), "plugins["+typ+"]: none", typ)

		// Referenced by the profile kvroute runs too: configured.
		doc = epc("[{type: token-load-scorer}, {type: "+typ+"}]",
			"[{name: default, plugins: [{pluginRef: token-load-scorer}, {pluginRef: "+typ+"}]}, {name: other, plugins: [{pluginRef: "+typ+"}]}]")
		require.NotNil(t, loadResult(t, doc).Session, typ)
	}

	// Under P/D kvroute runs both the prefill and the decode profile.
	doc := strings.Replace(pdConfig, "- type: max-score-picker\n", "- type: max-score-picker\n- type: session-affinity-scorer\n", 1)
	doc = strings.Replace(doc, "  - pluginRef: max-score-picker\n- name: decode", "  - pluginRef: session-affinity-scorer\n  - pluginRef: max-score-picker\n- name: decode", 1)
	require.NotNil(t, loadResult(t, doc).Session)
}

// A session-affinity-scorer that the profile kvroute runs weighs 0 is
// muted in llm-d, and one it weighs below 0 steers each session away from
// its endpoint: kvroute configures no session affinity for either, as for
// a lora-affinity-scorer, where it turned on its session scorer at weight 1
// and so pinned sessions that llm-d spreads or steers away.
func TestPickerConfigSessionScorerWeightNotPositive(t *testing.T) {
	const at = "schedulingProfiles[default].plugins[session-affinity-scorer].weight"
	for w, kind := range map[string]string{"0": "unneeded", "-2": "none"} {
		doc := epc("[{type: token-load-scorer}, {type: session-affinity-scorer, parameters: {strategy: session_id}}]",
			"[{name: default, plugins: [{pluginRef: token-load-scorer}, {pluginRef: session-affinity-scorer, weight: "+w+"}]}]")
		res := loadResult(t, doc)
		require.Nil(t, res.Session, w)
		require.Contains(t, findingPaths(res.Findings), at+": "+kind, w)

		// The next session plugin the profile references is the one kvroute runs.
		doc = epc("[{type: token-load-scorer}, {type: session-affinity-scorer}, {type: session-affinity-filter, parameters: {strategy: session_id}}]",
			"[{name: default, plugins: [{pluginRef: token-load-scorer}, {pluginRef: session-affinity-scorer, weight: "+w+"}, {pluginRef: session-affinity-filter}]}]")
		res = loadResult(t, doc)
		require.Equal(t, &session.Config{Headers: []string{"x-session-id"}, Cookie: "-", TTL: 5 * time.Minute}, res.Session, w)
	}

	// Under P/D, the decode profile's weight is the one kvroute takes.
	doc := strings.Replace(pdConfig, "- type: max-score-picker\n", "- type: max-score-picker\n- type: session-affinity-scorer\n", 1)
	res := loadResult(t, doc+"  - pluginRef: session-affinity-scorer\n    weight: 0\n")
	require.Nil(t, res.Session)
	require.Contains(t, findingPaths(res.Findings), "schedulingProfiles[decode].plugins[session-affinity-scorer].weight: unneeded")
}

// The flowControl feature gate turns kvroute's admission stage on with
// llm-d's queue timeout; the rest of flowControl names the
// --admission-config keys that do the same.
func TestPickerConfigFlowControl(t *testing.T) {
	doc := epc("[{type: token-load-scorer}, {type: prefix-cache-affinity-filter}, {type: concurrency-detector, parameters: {maxConcurrency: 64}}]", "") + `featureGates: [flowControl]
flowControl:
  maxBytes: 1Gi
  defaultRequestTTL: 45s
  priorityBands:
  - {priority: 10, maxRequests: 100}
  saturationDetector: {pluginRef: concurrency-detector}
  enableEviction: true
`
	res := loadResult(t, doc)
	require.Equal(t, &admission.Config{QueueTimeout: 45 * time.Second}, res.Admission)
	requireFindings(t, res.Findings,
		crowding,
		want{"plugins[concurrency-detector]", llmd.Different},
		want{"featureGates[flowControl]", llmd.Different},
		want{"flowControl.maxBytes", llmd.Different},
		want{"flowControl.priorityBands", llmd.Different},
		want{"flowControl.saturationDetector", llmd.Different},
		want{"flowControl.enableEviction", llmd.NoEquivalent},
		want{"plugins", llmd.Different},
	)
	for _, f := range res.Findings[1:6] {
		require.Contains(t, f.Note, "--admission-config", f.Path)
	}
	require.Contains(t, res.Findings[1].Note, "saturation.maxOpenRequests")
	require.Contains(t, res.Findings[2].Note, "--admission-config objectives")
	require.Contains(t, res.Findings[3].Note, "maxQueuedBytes")

	// The gate alone: llm-d's 60 s queue timeout.
	res = loadResult(t, epc("[{type: token-load-scorer}]", "")+"featureGates: [flowControl]\n")
	require.Equal(t, &admission.Config{QueueTimeout: time.Minute}, res.Admission)

	// flowControl without the gate is read by neither.
	res = loadResult(t, epc("[{type: token-load-scorer}]", "")+"flowControl: {defaultRequestTTL: 10s}\n")
	require.Nil(t, res.Admission)
	require.Contains(t, findingPaths(res.Findings), "flowControl: unneeded")

	// A zero TTL waits forever in llm-d; kvroute keeps its own bound.
	res = loadResult(t, epc("[{type: token-load-scorer}]", "")+"featureGates: [flowControl]\nflowControl: {defaultRequestTTL: 0s}\n")
	require.Equal(t, &admission.Config{}, res.Admission)
	require.Contains(t, findingPaths(res.Findings), "flowControl.defaultRequestTTL: none")

	_, err := llmd.LoadResult(strings.NewReader(epc("[]", "")+"featureGates: [flowControl]\nflowControl: {maxRequest: 5}\n"), llmd.Options{})
	require.ErrorIs(t, err, kvroute.ErrInvalidConfig)
	require.ErrorContains(t, err, "flowControl.maxRequest: unknown key")
}

// llm-d reads a feature gate as its name, or name=value with a boolean
// value, the last entry naming a gate winning: flowControl=true turns
// kvroute's admission stage on as flowControl does, flowControl=false
// leaves it off, and a value that is no boolean stops llm-d's picker, so
// it is an error here too.
func TestPickerConfigFeatureGateValues(t *testing.T) {
	base := epc("[{type: token-load-scorer}]", "")
	for gates, on := range map[string]bool{
		"[flowControl=true]":               true,
		"[flowControl= True ]":             true,
		"[flowControl=1]":                  true,
		"[flowControl=false]":              false,
		"[flowControl, flowControl=false]": false,
		"[flowControl=false, flowControl]": true,
	} {
		res := loadResult(t, base+"featureGates: "+gates+"\n")
		if on {
			require.Equal(t, &admission.Config{QueueTimeout: time.Minute}, res.Admission, gates)
		} else {
			require.Nil(t, res.Admission, gates)
		}
		for _, f := range res.Findings {
			require.NotContains(t, f.Note, noteNoGates, "%s: %s", gates, f.Path)
		}
	}

	// Another gate, with or without a value, is still kvroute's to report.
	res := loadResult(t, base+"featureGates: [HAPopulateNonLeaderDatastore=false]\n")
	require.Nil(t, res.Admission)
	require.Contains(t, findingPaths(res.Findings), "featureGates[HAPopulateNonLeaderDatastore=false]: different")

	_, err := llmd.LoadResult(strings.NewReader(base+"featureGates: [flowControl=yes]\n"), llmd.Options{})
	require.ErrorIs(t, err, kvroute.ErrInvalidConfig)
	require.ErrorContains(t, err, "featureGates[flowControl=yes]")
}

// noteNoGates begins the finding of a feature gate kvroute does not read.
const noteNoGates = "kvroute has no feature gates"

// Load, whose caller runs no stage beside the router, reports each stage
// the document configures, so that a host reading its configuration with
// Load (the gateway) is not left believing P/D is on.
func TestLoadReportsStagesItDrops(t *testing.T) {
	_, findings, err := llmd.Load(strings.NewReader(pdConfig), llmd.Options{})
	require.NoError(t, err)
	last := findings[len(findings)-1]
	require.Equal(t, "plugins[disagg-profile-handler]", last.Path)
	require.Contains(t, last.Note, "prefill/decode disaggregation (package disagg; the gateway's disagg block)")
	_, err = llmd.Translate(strings.NewReader(pdConfig))
	require.ErrorContains(t, err, "plugins[disagg-profile-handler]")
}

// A kvroute configuration document configures no stage beside the router.
func TestLoadResultKvrouteDocument(t *testing.T) {
	res, err := llmd.LoadResult(strings.NewReader("model: m\n"), llmd.Options{Strict: true})
	require.NoError(t, err)
	require.Equal(t, "m", res.Config.Model)
	require.Nil(t, res.Disagg)
	require.Nil(t, res.Session)
	require.Nil(t, res.Admission)
	require.Nil(t, res.LoRA)
}

// A decider no handler runs is still checked, as llm-d builds every plugin
// it lists and refuses bad parameters at start: a negative nonCachedTokens
// or an unknown key in an unused prefix-based decider, or any parameter of
// an unused always-disagg decider, is an error, and a good unused decider
// is only a finding.
func TestPickerConfigUnusedDeciderIsChecked(t *testing.T) {
	withUnused := func(plugin string) string {
		return strings.Replace(pdConfig, "schedulingProfiles:\n", plugin+"schedulingProfiles:\n", 1)
	}
	for _, bad := range []string{
		"- {type: prefix-based-pd-decider, name: spare, parameters: {nonCachedTokens: -5}}\n",
		"- {type: prefix-based-pd-decider, name: spare, parameters: {nonCachedToken: 5}}\n",
		"- {type: always-disagg-pd-decider, name: spare, parameters: {nonCachedTokens: 5}}\n",
	} {
		_, err := llmd.LoadResult(strings.NewReader(withUnused(bad)), llmd.Options{})
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "spare", bad)
	}
	res := loadResult(t, withUnused("- {type: always-disagg-pd-decider, name: spare}\n"))
	require.Equal(t, &disagg.Config{NonCachedTokens: 256}, res.Disagg)
	var found bool
	for _, f := range res.Findings {
		found = found || (f.Kind == llmd.NotNeeded && strings.Contains(f.Path, "spare"))
	}
	require.True(t, found, "%+v", res.Findings)
}
